package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cellserver/cellserver/internal/setting"
	"github.com/cellserver/cellserver/region"
)

// secretFiles are the settings that name files holding secrets
// (requirepass-file, cluster-secret-file, region-peer-password-file), so
// that a secret never stands on the command line, where ps,
// /proc/PID/cmdline and /debug/pprof/cmdline show it to anyone. The server
// reads them once at start (readSecretFiles) into the secret settings they
// fill; a file that is empty or cannot be read stops the start with an
// error naming it.
type secretFiles struct {
	RequirePass   string   // requirepass-file
	ClusterSecret string   // cluster-secret-file
	RegionPeers   wordList // region-peer-password-file: NAME PATH, repeated

	// regionPasswords are the peer regions' passwords read from
	// RegionPeers' files, by region name; empty until readSecretFiles.
	regionPasswords map[string]string
}

var secretFileDirectives = []directive{
	{name: "requirepass-file", field: func(c *Config) any { return &c.Secrets.RequirePass }},
	{name: "cluster-secret-file", field: func(c *Config) any { return &c.Secrets.ClusterSecret }},
	{name: "region-peer-password-file", field: func(c *Config) any { return &c.Secrets.RegionPeers }},
}

// readSecretFile returns the secret the file at path holds: its content
// less trailing newlines (an editor's or echo's), which must leave
// something. Errors name the setting and the file, never the content.
func readSecretFile(setting, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: cannot read the secret: %w", setting, err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("%s %s: the file is empty: it must hold the secret", setting, path)
	}
	return s, nil
}

// validateSecretFiles reports a secret given both inline and as a file.
// The files themselves are read by readSecretFiles, after Validate.
func (c *Config) validateSecretFiles() error {
	var errs []error
	if c.Secrets.RequirePass != "" && c.RequirePass != "" {
		errs = append(errs, errors.New("requirepass and requirepass-file are both set: give the password one way"))
	}
	if c.Secrets.ClusterSecret != "" && c.Cluster.Secret != "" {
		errs = append(errs, errors.New("cluster-secret and cluster-secret-file are both set: give the secret one way"))
	}
	if _, err := c.Secrets.RegionPeers.pairs("region-peer-password-file"); err != nil {
		errs = append(errs, err)
	} else if c.Region.Name == "" && len(c.Secrets.RegionPeers.words) > 0 {
		errs = append(errs, errors.New("region-peer-password-file needs region"))
	}
	return errors.Join(errs...)
}

// readSecretFiles reads every secret file configured into the secret
// setting it fills.
func (c *Config) readSecretFiles() error {
	var err error
	if p := c.Secrets.RequirePass; p != "" {
		if c.RequirePass, err = readSecretFile("requirepass-file", p); err != nil {
			return err
		}
	}
	if p := c.Secrets.ClusterSecret; p != "" {
		if c.Cluster.Secret, err = readSecretFile("cluster-secret-file", p); err != nil {
			return err
		}
	}
	pairs, err := c.Secrets.RegionPeers.pairs("region-peer-password-file")
	if err != nil {
		return err
	}
	c.Secrets.regionPasswords = map[string]string{}
	for _, p := range pairs {
		if c.Secrets.regionPasswords[p[0]], err = readSecretFile("region-peer-password-file "+p[0], p[1]); err != nil {
			return err
		}
	}
	return nil
}

// applyRegionPasswords gives each peer region named by a
// region-peer-password-file its password (empty before readSecretFiles,
// as while Validate runs).
func (s *secretFiles) applyRegionPasswords(peers []region.PeerConfig) error {
	pairs, err := s.RegionPeers.pairs("region-peer-password-file")
	if err != nil {
		return err
	}
	for _, p := range pairs {
		found := false
		for i := range peers {
			if peers[i].Name != p[0] {
				continue
			}
			if peers[i].Password != "" {
				return fmt.Errorf("region %s has both region-peer-password and region-peer-password-file: give its password one way", p[0])
			}
			peers[i].Password, found = s.regionPasswords[p[0]], true
		}
		if !found {
			return fmt.Errorf("region-peer-password-file %s: no such region-peer", p[0])
		}
	}
	return nil
}

// rewriteSkipsSecret reports whether CONFIG REWRITE must leave the secret
// setting name out of the file: a file setting fills it (FileOf), so the
// secret read from it is not written next to it.
func (given *Config) rewriteSkipsSecret(name string) bool {
	for _, d := range secretFileDirectives {
		spec := setting.Must(d.name)
		if spec.FileOf == name && rawField(d.field(given)) != "" {
			return true
		}
	}
	return false
}
