package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/cellserver/cellserver/internal/setting"
	"github.com/cellserver/cellserver/region"
	"github.com/cellserver/cellserver/resp"
)

// regionConfig holds the directives of the region layer (package region):
// this region's name, its peers, the key policy and what a global key does
// when its home does not answer.
type regionConfig struct {
	Name        string        // region; "": regions off
	Peers       wordList      // region-peer: NAME ADDRS, repeated
	Passwords   wordList      // region-peer-password: NAME PASSWORD, repeated
	Policy      wordList      // region-policy: PATTERN MODE [HOME], repeated
	Weights     wordList      // region-weight: NAME W, repeated
	Unreachable string        // region-unreachable: error, local or deny
	Timeout     time.Duration // region-timeout
	Sync        time.Duration // region-sync-interval
	Backlog     int64         // region-backlog-bytes

	// gate is the running region layer, built by startStorage; nil before
	// and without a region.
	gate *region.Gate
}

func defaultRegionConfig() regionConfig {
	return regionConfig{Unreachable: "error", Timeout: time.Second, Sync: 100 * time.Millisecond, Backlog: region.DefaultBacklogBytes}
}

var regionDirectives = []directive{
	{name: "region", field: func(c *Config) any { return &c.Region.Name }},
	{name: "region-peer", field: func(c *Config) any { return &c.Region.Peers }},
	{name: "region-peer-password", field: func(c *Config) any { return &c.Region.Passwords }},
	{name: "region-policy", field: func(c *Config) any { return &c.Region.Policy }},
	{name: "region-weight", field: func(c *Config) any { return &c.Region.Weights }},
	{name: "region-unreachable", field: func(c *Config) any { return &c.Region.Unreachable }},
	{name: "region-timeout", field: func(c *Config) any { return &c.Region.Timeout }},
	{name: "region-sync-interval", field: func(c *Config) any { return &c.Region.Sync }},
	{name: "region-backlog-bytes", field: func(c *Config) any { return &c.Region.Backlog }},
}

// wordList is a repeatable directive: every occurrence appends its words
// (quotes removed, as in the configuration file).
type wordList struct{ words []string }

// Set appends the words of v.
func (w *wordList) Set(v string) error {
	words, err := setting.SplitLine(strings.TrimSpace(v))
	if err != nil {
		return err
	}
	w.words = append(w.words, words...)
	return nil
}

// String writes the words back as Set reads them, quoting those that need
// it (setting.JoinWords).
func (w wordList) String() string { return setting.JoinWords(w.words) }

// pairs reads the words as NAME VALUE pairs.
func (w *wordList) pairs(directive string) ([][2]string, error) {
	if len(w.words)%2 != 0 {
		return nil, fmt.Errorf("%s: expected NAME VALUE pairs, got %q", directive, w.String())
	}
	var out [][2]string
	for i := 0; i < len(w.words); i += 2 {
		out = append(out, [2]string{w.words[i], w.words[i+1]})
	}
	return out, nil
}

// validRegionName reports whether s is 1 to 64 letters, digits, '-', '_'
// or '.' (as group names).
func validRegionName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// gateConfig builds the region layer's configuration from the directives.
func (c *Config) gateConfig(logger *slog.Logger) (region.Config, error) {
	r := &c.Region
	u, ok := region.ParseUnreachable(r.Unreachable)
	if !ok {
		return region.Config{}, fmt.Errorf("region-unreachable: %q is not error, local or deny", r.Unreachable)
	}
	gc := region.Config{Name: r.Name, Unreachable: u, Timeout: r.Timeout, MaxLogLimit: c.SLMaxLimit,
		SyncInterval: r.Sync, BacklogBytes: r.Backlog,
		Weights: map[string]int64{}, Logger: logger}
	if !validRegionName(r.Name) {
		return gc, fmt.Errorf("region %q: expected 1 to 64 letters, digits, '-', '_' or '.'", r.Name)
	}
	peers, err := r.Peers.pairs("region-peer")
	if err != nil {
		return gc, err
	}
	for _, p := range peers {
		if !validRegionName(p[0]) {
			return gc, fmt.Errorf("region-peer %q: expected 1 to 64 letters, digits, '-', '_' or '.'", p[0])
		}
		gc.Peers = append(gc.Peers, region.PeerConfig{Name: p[0], Addrs: strings.Split(p[1], ",")})
	}
	pw, err := r.Passwords.pairs("region-peer-password")
	if err != nil {
		return gc, errors.New("region-peer-password: expected NAME PASSWORD pairs") // never echo a password
	}
	for _, p := range pw {
		found := false
		for i := range gc.Peers {
			if gc.Peers[i].Name == p[0] {
				gc.Peers[i].Password, found = p[1], true
			}
		}
		if !found {
			return gc, fmt.Errorf("region-peer-password %s: no such region-peer", p[0])
		}
	}
	if err := c.Secrets.applyRegionPasswords(gc.Peers); err != nil {
		return gc, err
	}
	ws, err := r.Weights.pairs("region-weight")
	if err != nil {
		return gc, err
	}
	for _, w := range ws {
		n, err := strconv.ParseInt(w[1], 10, 64)
		if err != nil {
			return gc, fmt.Errorf("region-weight %s: %q is not an integer", w[0], w[1])
		}
		gc.Weights[w[0]] = n
	}
	if gc.Policy, err = region.ParsePolicy(r.Policy.words); err != nil {
		return gc, err
	}
	if c.Cluster.tlsOn() && (c.Ops.TLSCertFile == "" || c.Ops.TLSKeyFile == "" || c.Ops.TLSCACertFile == "") {
		return gc, errors.New("tls-replication with region: links to peer regions are TLS and need tls-cert-file, tls-key-file and tls-ca-cert-file")
	}
	return gc, gc.Validate()
}

// validateRegion checks the region directives; with no region, none of the
// others may be set.
func (c *Config) validateRegion() error {
	r := &c.Region
	if r.Name == "" {
		if len(r.Peers.words)+len(r.Passwords.words)+len(r.Policy.words)+len(r.Weights.words) > 0 {
			return errors.New("region-peer, region-peer-password, region-policy and region-weight need region")
		}
		return nil
	}
	_, err := c.gateConfig(nil)
	return err
}

// startRegion puts the region layer in front of st's backend, when a region
// is configured; its links close with stop.
func (st *storage) startRegion(cfg *Config, logger *slog.Logger) (stop func(), err error) {
	if cfg.Region.Name == "" {
		return func() {}, nil
	}
	gc, err := cfg.gateConfig(logger)
	if err != nil {
		return nil, err
	}
	if cfg.Cluster.tlsOn() {
		// Links to peer regions are mutual TLS with this node's
		// certificate, trusting the CA of tls-ca-cert-file, as the raft
		// port is with tls-replication.
		cert, pool, err := cfg.Ops.loadTLSFiles()
		if err != nil {
			return nil, fmt.Errorf("region links: %w", err)
		}
		gc.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	g, err := region.New(gc, st.backend)
	if err != nil {
		return nil, err
	}
	if certs := cfg.Ops.certs; certs != nil && gc.TLS != nil {
		// Rotated certificates reach the links to peer regions too.
		certs.addOnLoad(func(cert tls.Certificate, pool *x509.CertPool) error {
			return g.SetTLS(&tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12})
		})
	}
	cfg.Region.gate = g
	st.backend = g
	logger.Info("region layer on", "region", gc.Name, "peers", len(gc.Peers), "policies", gc.Policy.Len())
	return g.Close, nil
}

// regionSettings are the CONFIG GET/SET entries of the region layer:
// region-policy changes live; the others are read-only, shown from the
// settings table (tableSettings).
func (c *Config) regionSettings() []resp.Setting {
	r := &c.Region
	return []resp.Setting{{
		Name: "region-policy",
		Get: func() string {
			if r.gate == nil {
				return r.Policy.String()
			}
			return r.gate.Policy().String()
		},
		Set: func(v string) error {
			if r.gate == nil {
				return region.ErrNotConfigured
			}
			words, err := setting.SplitLine(strings.TrimSpace(v))
			if err != nil {
				return err
			}
			p, err := region.ParsePolicy(words)
			if err != nil {
				return err
			}
			return r.gate.SetPolicy(p)
		},
	}}
}
