package test

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/poll"
	"github.com/cellserver/cellserver/internal/testcert"
)

// writeThroughFollowers runs one CL.THROTTLE on a fresh key through each
// follower (l is the leader's index) and fails unless each is allowed.
func writeThroughFollowers(t *testing.T, nodes []*clusterNode, l int) {
	t.Helper()
	for i, nd := range nodes {
		if i == l {
			continue
		}
		c := noRetryClient(t, nd.Addr)
		key := "via:" + nd.id
		r, err := throttle(ctxT(t), c, key, 9, 10, 60)
		if err != nil || r[0] != 0 || r[2] != 9 {
			t.Fatalf("CL.THROTTLE %s 9 10 60 via %s = %v, %v; want allowed, remaining 9\n%s", key, nd.id, r, err, nd.output)
		}
		if ttl, err := c.TTL(ctxT(t), key).Result(); err != nil || ttl <= 0 {
			t.Fatalf("TTL %s via %s (a forwarded linearizable read) = %v, %v; want > 0", key, nd.id, ttl, err)
		}
	}
}

// Forwarding does not go through the RESP port: a password set on the
// leader's RESP port alone does not stop the followers from forwarding.
func TestClusterRequirepassOnOneNode(t *testing.T) {
	nodes := startCluster(t, 3)
	l := waitLeader(t, nodes)
	lc := noRetryClient(t, nodes[l].Addr)
	if err := lc.ConfigSet(ctxT(t), "requirepass", "x").Err(); err != nil {
		t.Fatalf("CONFIG SET requirepass x on the leader: %v", err)
	}
	writeThroughFollowers(t, nodes, l)
	auth := redis.NewClient(&redis.Options{Addr: nodes[l].Addr, Password: "x", MaxRetries: -1})
	defer auth.Close()
	if r, err := throttle(ctxT(t), auth, "via:"+nodes[l].id, 9, 10, 60); err != nil || r[0] != 0 {
		t.Fatalf("CL.THROTTLE on the leader with AUTH = %v, %v; want allowed", r, err)
	}
}

// With tls-replication every raft-port connection (replication and
// forwarding) is mutual TLS, and the cluster forms and forwards as usual.
func TestClusterTLSReplication(t *testing.T) {
	p := newTestPKI(t)
	nodes := startCluster(t, 3, "--tls-replication", "yes", "--tls-cert-file", p.NodeCert,
		"--tls-key-file", p.NodeKey, "--tls-ca-cert-file", p.CAFile)
	l := waitLeader(t, nodes)
	writeThroughFollowers(t, nodes, l)
	got, err := noRetryClient(t, nodes[l].Addr).ConfigGet(ctxT(t), "tls-*").Result()
	if err != nil || got["tls-replication"] != "yes" || got["tls-cluster"] != "no" {
		t.Fatalf("CONFIG GET tls-* = %v, %v; want tls-replication yes, tls-cluster no", got, err)
	}
}

// Certificate rotation on the raft port: every node's files are replaced
// by certificates of a new CA and each node gets SIGHUP; then a follower is
// killed and restarted (it reads only the new files). It rejoins and
// forwards, which it can only do if the running nodes took the new CA and
// certificate on their raft port too (before they did, its handshakes
// failed both ways).
func TestClusterTLSReplicationRotation(t *testing.T) {
	files := newRotatingNodeFiles(t)
	nodes := startCluster(t, 3, files.args()...)
	l := waitLeader(t, nodes)
	writeThroughFollowers(t, nodes, l)

	files.rotate(t)
	for _, nd := range nodes {
		reloadCerts(t, nd.server)
	}
	f := (l + 1) % len(nodes)
	nodes[f].kill()
	nodes[f].start()
	poll.Until(t, 30*time.Second, func() error {
		r, err := throttle(ctxT(t), noRetryClient(t, nodes[f].Addr), "rotated", 9, 10, 60)
		if err != nil || r[0] != 0 {
			return fmt.Errorf("CL.THROTTLE via the restarted %s = %v, %v", nodes[f].id, r, err)
		}
		return nil
	})
	for _, nd := range nodes {
		if r, err := throttle(ctxT(t), noRetryClient(t, nd.Addr), "after:"+nd.id, 9, 10, 60); err != nil || r[0] != 0 {
			t.Fatalf("CL.THROTTLE via %s after the rotation = %v, %v", nd.id, r, err)
		}
	}
}

// rotatingNodeFiles are a node certificate, its key and the CA, at paths
// of their own, which rotate replaces with those of a new CA.
type rotatingNodeFiles struct{ cert, key, ca string }

func newRotatingNodeFiles(t *testing.T) *rotatingNodeFiles {
	t.Helper()
	p := newTestPKI(t)
	dir := t.TempDir()
	f := &rotatingNodeFiles{filepath.Join(dir, "node.crt"), filepath.Join(dir, "node.key"), filepath.Join(dir, "ca.crt")}
	replaceFile(t, p.NodeCert, f.cert)
	replaceFile(t, p.NodeKey, f.key)
	replaceFile(t, p.CAFile, f.ca)
	return f
}

// args are the flags of a node using the files for tls-replication.
func (f *rotatingNodeFiles) args() []string {
	return []string{"--tls-replication", "yes", "--tls-cert-file", f.cert, "--tls-key-file", f.key, "--tls-ca-cert-file", f.ca}
}

// rotate writes a certificate and key of a new CA, and that CA, over the
// files.
func (f *rotatingNodeFiles) rotate(t *testing.T) {
	t.Helper()
	newCA := testcert.NewCA(t, "rotated CA")
	dir := t.TempDir()
	cert, key := issue(t, dir, "node", newCA, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	replaceFile(t, cert, f.cert)
	replaceFile(t, key, f.key)
	replaceFile(t, writePEM(t, dir, "ca.crt", "CERTIFICATE", newCA.Cert.Raw), f.ca)
}

// replaceFile writes src's bytes aside dst, then renames them over it: a
// reload never reads half a file.
func replaceFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst+".new", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dst+".new", dst); err != nil {
		t.Fatal(err)
	}
}

// reloadCerts sends s SIGHUP and waits until it logs the reload.
func reloadCerts(t *testing.T, s *server) {
	t.Helper()
	before := strings.Count(s.output.String(), "SIGHUP: TLS certificates reloaded")
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 15*time.Second, func() error {
		if strings.Count(s.output.String(), "SIGHUP: TLS certificates reloaded") <= before {
			return fmt.Errorf("%s has not reloaded its certificates", s.Addr)
		}
		return nil
	})
}

// tls-replication without the certificate files does not start.
func TestClusterTLSReplicationNeedsFiles(t *testing.T) {
	s := newServer(t, "--node-id", "n1", "--raft-addr", "127.0.0.1:"+strconv.Itoa(freePort(t)), "--bootstrap", "yes", "--tls-replication", "yes")
	s.launch()
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		t.Fatal("cellserver started with tls-replication and no certificate")
	}
	if s.err == nil || !strings.Contains(s.output.String(), "tls-cert-file") {
		t.Fatalf("exit %v, output:\n%s\nwant a start-up error naming tls-cert-file", s.err, s.output)
	}
}

// A node started with the wrong cluster secret never becomes a member: the
// leader's check of its raft port fails the handshake, and the node logs
// the refusal. CONFIG GET does not reveal the secret.
func TestClusterWrongSecret(t *testing.T) {
	nodes := startCluster(t, 2, "--cluster-secret", "right")
	bad := startClusterNode(t, "n3", nodes[0].Addr, "--cluster-secret", "wrong")
	poll.Until(t, 20*time.Second, func() error {
		out := bad.output.String()
		if !strings.Contains(out, "refused raft connection from 127.0.0.1:") || !strings.Contains(out, "bad cluster secret") {
			return fmt.Errorf("n3 has not logged the refusal:\n%s", out)
		}
		if !strings.Contains(out, "join attempt failed") {
			return fmt.Errorf("n3 has not seen its join fail")
		}
		return nil
	})
	for _, nd := range nodes {
		if inf := raftInfo(nd); inf["raft_members"] != "2" {
			t.Fatalf("%s: raft_members %q, want 2 (n3 must not be added)", nd.id, inf["raft_members"])
		}
	}
	if inf := raftInfo(bad); inf["raft_leader_id"] != "" || inf["raft_members"] != "0" && inf["raft_members"] != "" {
		t.Fatalf("n3: leader %q, members %q; want none", inf["raft_leader_id"], inf["raft_members"])
	}
	writeThroughFollowers(t, nodes, waitLeader(t, nodes))
	got, err := noRetryClient(t, nodes[0].Addr).ConfigGet(context.Background(), "cluster-secret").Result()
	if err != nil || got["cluster-secret"] != "(redacted)" {
		t.Fatalf("CONFIG GET cluster-secret = %v, %v; want (redacted)", got, err)
	}
}
