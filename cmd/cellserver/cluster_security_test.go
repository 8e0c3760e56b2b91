package main

import (
	"bytes"
	"strings"
	"testing"
)

// The node-to-node security directives: read from the file and flags,
// validated, and shown by CONFIG GET without the secret.
func TestClusterSecurityDirectives(t *testing.T) {
	base := []string{"--node-id", "n1", "--raft-addr", "127.0.0.1:7100", "--bootstrap", "yes"}
	files := []string{"--tls-cert-file", "node.crt", "--tls-key-file", "node.key", "--tls-ca-cert-file", "ca.crt"}
	conf := writeFile(t, "cluster-secret \"two words\"\ntls-cluster yes\n")
	tests := []struct {
		name    string
		args    []string
		wantErr string // "" : valid
	}{
		{"secret only", append(base, "--cluster-secret", "s"), ""},
		{"tls-replication with the files", append(append(base, "--tls-replication", "yes"), files...), ""},
		{"tls-replication without files", append(base, "--tls-replication", "yes"), "need tls-cert-file, tls-key-file and tls-ca-cert-file"},
		{"tls-cluster without a CA", append(base, "--tls-cluster", "yes", "--tls-cert-file", "a", "--tls-key-file", "b"), "tls-ca-cert-file"},
		{"from the config file, no files", append([]string{conf}, base...), "need tls-cert-file"},
		{"not yes or no", append(base, "--tls-replication", "maybe"), "yes or no"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _, err := parseArgs(tt.args, &bytes.Buffer{})
			if err == nil {
				err = cfg.Validate()
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("parse and validate %v: %v", tt.args, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("parse and validate %v = %v, want an error containing %q", tt.args, err, tt.wantErr)
			}
		})
	}

	cfg, _, err := parseArgs([]string{conf}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Cluster.Secret != "two words" || !cfg.Cluster.TLSCluster || cfg.Cluster.TLSReplication {
		t.Fatalf("from %s: secret %q, tls-cluster %v, tls-replication %v", conf, cfg.Cluster.Secret, cfg.Cluster.TLSCluster, cfg.Cluster.TLSReplication)
	}
	if rc := cfg.replicationConfig(); rc.ClusterSecret != "two words" {
		t.Fatalf("replication ClusterSecret = %q, want the directive's", rc.ClusterSecret)
	}
	shown := map[string]string{}
	for _, st := range cfg.tableSettings() {
		shown[st.Name] = st.Get()
	}
	if shown["cluster-secret"] != "(redacted)" || shown["tls-cluster"] != "yes" || shown["tls-replication"] != "no" {
		t.Fatalf("CONFIG GET shows %v; want cluster-secret (redacted), tls-cluster yes, tls-replication no", shown)
	}
	none := DefaultConfig()
	for _, st := range none.tableSettings() {
		if st.Name == "cluster-secret" && st.Get() != "" {
			t.Fatalf("CONFIG GET cluster-secret with none set = %q, want empty", st.Get())
		}
	}
}
