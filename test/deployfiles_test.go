package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gopkg.in/yaml.v3"

	"github.com/cellserver/cellserver/internal/poll"
)

// interpolate expands compose's ${VAR}, ${VAR:-default} and ${VAR:?error}
// from env, failing the test on a required variable env lacks.
func interpolate(t *testing.T, s string, env map[string]string) string {
	t.Helper()
	return regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:-|:\?)([^}]*))?\}`).ReplaceAllStringFunc(s, func(m string) string {
		p := regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:-|:\?)([^}]*))?\}`).FindStringSubmatch(m)
		if v, ok := env[p[1]]; ok && v != "" {
			return v
		}
		switch p[2] {
		case ":-":
			return p[3]
		case ":?":
			t.Fatalf("compose needs %s: %s", p[1], p[3])
		}
		return ""
	})
}

// The compose file's three services, run as processes with the commands it
// gives them: each service name resolves (private /etc/hosts) to its own
// loopback address, as compose's network gives each container its own
// address; for the same reason the test moves what each container would
// have alone (0.0.0.0 listeners to the service's address, the ports 6379,
// 7000 and 9121 to free ones, /data to a temporary directory). The group
// bootstraps, every node reads ready, and a client with the password is
// served by each node.
func TestComposeGroup(t *testing.T) {
	if !canMapHosts() {
		t.Skip("needs root and unshare to give each process its own /etc/hosts")
	}
	b, err := os.ReadFile("../deploy/compose/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Services map[string]struct {
			Image   string   `yaml:"image"`
			Command []string `yaml:"command"`
			Volumes []string `yaml:"volumes"`
			Secrets []string `yaml:"secrets"`
		} `yaml:"services"`
		Secrets map[string]struct {
			File string `yaml:"file"`
		} `yaml:"secrets"`
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	if len(file.Services) != 3 {
		t.Fatalf("compose.yaml has %d services, want 3", len(file.Services))
	}
	// The secrets: files on the host, named by the environment, mounted
	// by compose at /run/secrets/NAME (here: the host file itself).
	base := t.TempDir()
	password, clusterSecret := "pw-"+strconv.Itoa(os.Getpid()), "cs-"+strconv.Itoa(os.Getpid())
	env := map[string]string{"CELLSERVER_PASSWORD_FILE": filepath.Join(base, "requirepass"), "CELLSERVER_CLUSTER_SECRET_FILE": filepath.Join(base, "cluster-secret")}
	for f, v := range map[string]string{env["CELLSERVER_PASSWORD_FILE"]: password, env["CELLSERVER_CLUSTER_SECRET_FILE"]: clusterSecret} {
		if err := os.WriteFile(f, []byte(v+"\n"), 0o400); err != nil {
			t.Fatal(err)
		}
	}
	secretAt := map[string]string{}
	for n, sec := range file.Secrets {
		secretAt["/run/secrets/"+n] = interpolate(t, sec.File, env)
	}
	ports := map[string]string{"6379": strconv.Itoa(freePort(t)), "7000": strconv.Itoa(freePort(t)), "9121": strconv.Itoa(freePort(t))}
	names := make([]string, 0, 3)
	for n := range file.Services {
		names = append(names, n)
	}
	sort.Strings(names)
	var hostLines []string
	pods := make([]*chartPod, len(names))
	for i, n := range names {
		svc := file.Services[n]
		if !slices.ContainsFunc(svc.Volumes, func(v string) bool { return strings.HasSuffix(v, ":/data") }) {
			t.Errorf("%s keeps no volume at /data: %v", n, svc.Volumes)
		}
		p := &chartPod{name: n, ip: fmt.Sprintf("127.0.0.%d", 40+i), dataDir: filepath.Join(base, n)}
		for _, a := range svc.Command {
			a = interpolate(t, a, env)
			if a == password || a == clusterSecret || a == "--requirepass" || a == "--cluster-secret" {
				t.Errorf("%s: a secret on the command line: %v", n, svc.Command)
			}
			if strings.HasPrefix(a, "/run/secrets/") {
				name := strings.TrimPrefix(a, "/run/secrets/")
				if !slices.Contains(svc.Secrets, name) || secretAt[a] == "" {
					t.Fatalf("%s reads %s but does not mount the secret %s", n, a, name)
				}
				a = secretAt[a]
			}
			a = strings.ReplaceAll(a, "0.0.0.0", p.ip)
			for from, to := range ports {
				if a == from {
					a = to
				}
				a = strings.ReplaceAll(a, ":"+from, ":"+to)
			}
			if a == "/data" {
				a = p.dataDir
			}
			p.args = append(p.args, a)
		}
		hostLines = append(hostLines, p.ip+" "+n)
		pods[i] = p
		t.Cleanup(p.kill)
	}
	hosts := filepath.Join(base, "hosts")
	if err := os.WriteFile(hosts, []byte("127.0.0.1 localhost\n"+strings.Join(hostLines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		p.start(t, hosts)
	}
	for _, p := range pods {
		poll.Until(t, 60*time.Second, func() error {
			select {
			case <-p.done:
				t.Fatalf("%s exited:\n%s", p.name, p.out)
			default:
			}
			if code, body := probe(p.ip+":"+ports["9121"], "/readyz"); code != 200 {
				return fmt.Errorf("%s /readyz = %d %q\n%s", p.name, code, body, p.out)
			}
			return nil
		})
	}
	for i, p := range pods {
		c := redis.NewClient(&redis.Options{Addr: p.ip + ":" + ports["6379"], Password: password, MaxRetries: -1})
		defer c.Close()
		got, err := c.Do(ctxT(t), "CL.THROTTLE", "user:compose", "0", "1", "60").Int64Slice()
		if err != nil || len(got) != 5 || got[0] != int64(min(i, 1)) {
			t.Errorf("CL.THROTTLE user:compose 0 1 60 via %s (request %d) = %v, %v; want allowed first, then limited", p.name, i+1, got, err)
		}
	}
}

// The systemd unit: systemd-analyze verify finds nothing to say about it
// (ExecStart pointed at the test's binary, as it must exist), and it keeps
// the hardening this project documents.
func TestSystemdUnit(t *testing.T) {
	b, err := os.ReadFile("../deploy/systemd/cellserver.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	for _, d := range []string{"DynamicUser=yes", "ProtectSystem=strict", "StateDirectory=cellserver", "LimitNOFILE=", "Restart=on-failure", "NoNewPrivileges=yes", "CapabilityBoundingSet=\n"} {
		if !strings.Contains(unit, d) {
			t.Errorf("cellserver.service lacks %q", d)
		}
	}
	for _, l := range strings.Split(unit, "\n") {
		if strings.HasPrefix(l, "ExecStart=") && (strings.Contains(l, "--requirepass ") || strings.Contains(l, "--cluster-secret ")) {
			t.Errorf("cellserver.service puts a secret on the command line: %s", l)
		}
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "cellserver.service")
	if err := os.WriteFile(p, []byte(strings.ReplaceAll(unit, "/usr/local/bin/cellserver", binary)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", p).CombinedOutput()
	if err != nil || strings.Contains(string(out), "cellserver.service") {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
