package rls

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// maxFileSize bounds one configuration file (bytes): a larger file is
// refused rather than read into memory.
const maxFileSize = 16 << 20

// LoadDir loads every configuration file of dir: the files whose names end
// in .yaml or .yml, in name order, skipping names that begin with a dot
// (the hidden entries a Kubernetes ConfigMap mount holds). Subdirectories
// are not read. Each file holds one domain, and a domain may appear in one
// file only. An empty dir ("") gives an empty configuration, which answers
// OK to every descriptor. Errors wrap ErrConfig and name the file, or are
// the file system's.
func LoadDir(dir string) (*Config, error) {
	c := newConfig()
	if dir == "" {
		return c, nil
	}
	files, err := configFiles(dir)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if f.size > maxFileSize {
			return nil, fmt.Errorf("%w: %s: larger than %d bytes", ErrConfig, f.path, maxFileSize)
		}
		b, err := os.ReadFile(f.path)
		if err != nil {
			return nil, fmt.Errorf("rls: %w", err)
		}
		if err := c.add(f.path, b); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// fileStamp identifies one version of a configuration file: a change of
// its name, size or modification time is a change of the configuration.
type fileStamp struct {
	path  string
	size  int64
	mtime int64 // Unix ns
}

// configFiles lists dir's configuration files (symbolic links followed) in
// name order.
func configFiles(dir string) ([]fileStamp, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("rls: config directory: %w", err)
	}
	var out []fileStamp
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
			continue
		}
		path := filepath.Join(dir, name)
		fi, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("rls: %w", err)
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		out = append(out, fileStamp{path: path, size: fi.Size(), mtime: fi.ModTime().UnixNano()})
	}
	slices.SortFunc(out, func(a, b fileStamp) int { return strings.Compare(a.path, b.path) })
	return out, nil
}

// fingerprint returns a value that changes whenever dir's configuration
// files change (added, removed, rewritten), or an error text when the
// directory cannot be read, so that a directory that comes back is seen as
// a change too.
func fingerprint(dir string) string {
	if dir == "" {
		return ""
	}
	files, err := configFiles(dir)
	if err != nil {
		return "error: " + err.Error()
	}
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "%s\x00%d\x00%d\n", f.path, f.size, f.mtime)
	}
	return b.String()
}
