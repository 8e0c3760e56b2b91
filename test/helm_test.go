package test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gopkg.in/yaml.v3"

	"github.com/cellserver/cellserver/internal/poll"
	"github.com/cellserver/cellserver/internal/testlog"
)

// helmBinary returns the helm to render the chart with ($HELM, then
// scripts/test.sh's tools directory, then PATH), or skips the test.
func helmBinary(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("HELM"), "../.tools/bin/helm"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	t.Skip("helm not installed (scripts/test.sh installs it)")
	return ""
}

// Values every render needs (the chart refuses to render without them),
// given before the test's own.
const (
	chartImage         = "registry.example/team/cellserver"
	chartRequirePass   = "chart-pw-8f3a1"
	chartClusterSecret = "chart-cs-77b2e"
)

var chartBase = []string{"image.repository=" + chartImage, "auth.requirepass=" + chartRequirePass, "auth.clusterSecret=" + chartClusterSecret}

// helmTemplate runs helm template on the chart with flags (--set ...,
// --is-upgrade) and returns its output and error.
func helmTemplate(helm string, flags ...string) ([]byte, error) {
	args := append([]string{"template", "t", "../deploy/helm/cellserver", "--namespace", "ns"}, flags...)
	return exec.Command(helm, args...).CombinedOutput()
}

// setFlags returns --set for each value.
func setFlags(set ...string) []string {
	var f []string
	for _, s := range set {
		f = append(f, "--set", s)
	}
	return f
}

// renderChart runs helm template on the chart with chartBase and the --set
// values given and returns the documents.
func renderChart(t *testing.T, helm string, set ...string) []map[string]any {
	t.Helper()
	return renderChartFlags(t, helm, setFlags(append(append([]string{}, chartBase...), set...)...)...)
}

// renderChartFlags is renderChart with helm template's flags as given.
func renderChartFlags(t *testing.T, helm string, flags ...string) []map[string]any {
	t.Helper()
	out, err := helmTemplate(helm, flags...)
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", strings.Join(flags, " "), err, out)
	}
	var docs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var d map[string]any
		if err := dec.Decode(&d); err != nil {
			break
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
	return docs
}

// dig follows keys (string keys of maps, int indexes of lists) into v.
func dig(v any, path ...any) any {
	for _, k := range path {
		switch k := k.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// TestHelmLint runs helm lint on the chart with one group and with
// several.
func TestHelmLint(t *testing.T) {
	helm := helmBinary(t)
	for _, set := range [][]string{nil, {"groups[0].name=a,groups[0].replicas=3,groups[1].name=b,groups[1].replicas=5"}} {
		args := append([]string{"lint", "--strict", "../deploy/helm/cellserver"}, setFlags(append(append([]string{}, chartBase...), set...)...)...)
		if out, err := exec.Command(helm, args...).CombinedOutput(); err != nil {
			t.Errorf("helm %v: %v\n%s", args, err, out)
		}
	}
}

// The chart's objects: one StatefulSet, headless Service and
// PodDisruptionBudget per group, the probes on /readyz and /healthz,
// --bootstrap-expect from replicas, and the slot Job only with several
// groups, assigning every slot once.
func TestHelmTemplate(t *testing.T) {
	helm := helmBinary(t)
	kinds := func(docs []map[string]any) map[string]int {
		n := map[string]int{}
		for _, d := range docs {
			n[d["kind"].(string)]++
		}
		return n
	}
	one := renderChart(t, helm)
	if k := kinds(one); k["StatefulSet"] != 1 || k["Service"] != 2 || k["PodDisruptionBudget"] != 1 || k["Job"] != 0 {
		t.Errorf("one group renders %v, want 1 StatefulSet, 2 Services, 1 PodDisruptionBudget, no Job", k)
	}
	for _, d := range one {
		switch d["kind"] {
		case "StatefulSet":
			c := dig(d, "spec", "template", "spec", "containers", 0)
			if p := dig(c, "readinessProbe", "httpGet", "path"); p != "/readyz" {
				t.Errorf("readiness probe path %v, want /readyz", p)
			}
			if p := dig(c, "livenessProbe", "httpGet", "path"); p != "/healthz" {
				t.Errorf("liveness probe path %v, want /healthz", p)
			}
			if p := dig(d, "spec", "podManagementPolicy"); p != "Parallel" {
				t.Errorf("podManagementPolicy %v, want Parallel", p)
			}
			args := fmt.Sprint(dig(c, "args"))
			if !strings.Contains(args, "--bootstrap-expect 3") || !strings.Contains(args, "--node-id $(POD_NAME)") {
				t.Errorf("args %s: want --bootstrap-expect 3 and --node-id $(POD_NAME)", args)
			}
		case "PodDisruptionBudget":
			if m := dig(d, "spec", "maxUnavailable"); m != 1 {
				t.Errorf("PodDisruptionBudget maxUnavailable %v, want 1", m)
			}
		case "Service":
			if dig(d, "spec", "clusterIP") == "None" && dig(d, "spec", "publishNotReadyAddresses") != true {
				t.Errorf("headless Service without publishNotReadyAddresses: peers cannot find each other before they are ready")
			}
		}
	}
	three := renderChart(t, helm, "groups[0].name=a,groups[0].replicas=3,groups[1].name=b,groups[1].replicas=3,groups[2].name=c,groups[2].replicas=5")
	if k := kinds(three); k["StatefulSet"] != 3 || k["PodDisruptionBudget"] != 3 || k["Job"] != 1 {
		t.Errorf("three groups render %v, want 3 StatefulSets, 3 PodDisruptionBudgets, 1 Job", k)
	}
	for _, d := range three {
		if d["kind"] != "Job" {
			continue
		}
		args := fmt.Sprint(dig(d, "spec", "template", "spec", "containers", 0, "args"))
		m := regexp.MustCompile(`--assign-slots (\S+)`).FindStringSubmatch(args)
		if m == nil || len(strings.Split(m[1], ",")) != 3 {
			t.Errorf("slot Job args %s: want --assign-slots with one address per group (3)", args)
			continue
		}
		for i, g := range []string{"a", "b", "c"} {
			want := fmt.Sprintf("t-cellserver-%s-0.t-cellserver-%s-peers.ns.svc.cluster.local:6379", g, g)
			if got := strings.Split(m[1], ",")[i]; got != want {
				t.Errorf("slot Job address %d = %s, want %s (group %s's first pod, in the order listed)", i, got, want, g)
			}
		}
	}
}

// canMapHosts reports whether a process can be given its own /etc/hosts
// (a private mount namespace: root, and unshare present).
func canMapHosts() bool {
	if os.Geteuid() != 0 {
		return false
	}
	return exec.Command("unshare", "-m", "sh", "-c", "mount --bind /etc/hosts /etc/hosts").Run() == nil
}

// chartPod is one process run as the chart's StatefulSet runs a pod.
type chartPod struct {
	name, ip string
	env      map[string]string // the container's environment, as the kubelet fills it in
	args     []string
	dataDir  string
	cmd      *exec.Cmd
	out      *testlog.Buffer
	done     chan struct{}
}

// start runs the pod's process with the hosts file in place of /etc/hosts.
func (p *chartPod) start(t *testing.T, hosts string) {
	t.Helper()
	if err := os.MkdirAll(p.dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	p.out = &testlog.Buffer{}
	p.done = make(chan struct{})
	// unshare and sh exec the server: the pid is the server's.
	p.cmd = exec.Command("unshare", append([]string{"-m", "sh", "-c", `mount --bind "$0" /etc/hosts && exec "$@"`, hosts, binary}, p.args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(p.cmd, p.done)
}

func (p *chartPod) kill() {
	if p.cmd == nil {
		return
	}
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// expandK8s substitutes $(VAR) from env as the kubelet does in a
// container's args ($$ escapes; an unknown variable stays as written).
func expandK8s(s string, env map[string]string) string {
	return regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		if v, ok := env[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

// The rendered chart's pods, run as processes with exactly the container
// args and env of the StatefulSet (the kubelet's part played by the test:
// the downward API's POD_NAME, POD_NAMESPACE and POD_IP filled in, $(VAR)
// expanded, each pod's DNS name mapped to its own loopback address in a
// private /etc/hosts). Values changed for the test only: the ports (free
// ones), listenAddress "$(POD_IP)" (three pods share one host) and dataDir
// (a temporary directory per pod). The group bootstraps and every pod
// reads ready; a key exhausted stays exhausted through a pod whose volume
// was lost (killed, its data directory wiped, restarted with the same
// args), which rejoins the group instead of forming one of its own; then a
// rolling restart, one pod at a time as the StatefulSet controller does it
// (SIGTERM, start, wait for /readyz), keeps the key exhausted.
func TestHelmChartPodsAsProcesses(t *testing.T) {
	helm := helmBinary(t)
	if !canMapHosts() {
		t.Skip("needs root and unshare to give each process its own /etc/hosts")
	}
	resp, raftPort, metricsPort := freePort(t), freePort(t), freePort(t)
	base := t.TempDir()
	docs := renderChart(t, helm,
		"ports.resp="+strconv.Itoa(resp), "ports.raft="+strconv.Itoa(raftPort), "ports.metrics="+strconv.Itoa(metricsPort),
		"listenAddress=$(POD_IP)", "dataDir="+base+"/$(POD_NAME)")
	var sts map[string]any
	for _, d := range docs {
		if d["kind"] == "StatefulSet" {
			sts = d
		}
	}
	if sts == nil {
		t.Fatal("no StatefulSet rendered")
	}
	name := dig(sts, "metadata", "name").(string)
	headless := dig(sts, "spec", "serviceName").(string)
	replicas := dig(sts, "spec", "replicas").(int)
	c := dig(sts, "spec", "template", "spec", "containers", 0)
	mounts := mountSecretVolumes(t, docs, dig(sts, "spec", "template", "spec"), c, filepath.Join(base, "secrets"))
	var rawArgs []string
	for _, a := range dig(c, "args").([]any) {
		a := fmt.Sprint(a)
		for from, to := range mounts {
			if strings.HasPrefix(a, from+"/") {
				a = to + strings.TrimPrefix(a, from)
			}
		}
		rawArgs = append(rawArgs, a)
	}
	pods := make([]*chartPod, replicas)
	for i := range pods {
		p := &chartPod{name: fmt.Sprintf("%s-%d", name, i), ip: fmt.Sprintf("127.0.0.%d", 20+i)}
		env := map[string]string{}
		for _, e := range dig(c, "env").([]any) {
			n := dig(e, "name").(string)
			switch fp := dig(e, "valueFrom", "fieldRef", "fieldPath"); fp {
			case "metadata.name":
				env[n] = p.name
			case "metadata.namespace":
				env[n] = "ns"
			case "status.podIP":
				env[n] = p.ip
			case nil:
				env[n] = fmt.Sprint(dig(e, "value"))
			default:
				t.Fatalf("env %s from %v: not filled in by this test", n, fp)
			}
		}
		p.env = env
		for _, a := range rawArgs {
			p.args = append(p.args, expandK8s(a, env))
		}
		p.dataDir = filepath.Join(base, p.name)
		pods[i] = p
		t.Cleanup(p.kill)
	}
	// The hosts file maps each pod's DNS name to its current IP; it is
	// rewritten in place, so the processes' bind mounts see the change.
	hosts := filepath.Join(base, "hosts")
	writeHosts := func() {
		t.Helper()
		lines := []string{"127.0.0.1 localhost"}
		for _, p := range pods {
			lines = append(lines, fmt.Sprintf("%s %s.%s.ns.svc.cluster.local", p.ip, p.name, headless))
		}
		if err := os.WriteFile(hosts, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeHosts()
	t.Logf("pod 0 runs: cellserver %s", strings.Join(pods[0].args, " "))
	for _, p := range pods {
		p.start(t, hosts)
	}
	ready := func(p *chartPod, within time.Duration) {
		t.Helper()
		poll.Until(t, within, func() error {
			select {
			case <-p.done:
				t.Fatalf("%s exited:\n%s", p.name, p.out)
			default:
			}
			if code, body := probe(p.ip+":"+strconv.Itoa(metricsPort), "/readyz"); code != 200 {
				return fmt.Errorf("%s /readyz = %d %q\n%s", p.name, code, body, p.out)
			}
			return nil
		})
	}
	for _, p := range pods {
		ready(p, 60*time.Second)
	}
	nodes := make([]*clusterNode, len(pods))
	for i, p := range pods {
		nodes[i] = &clusterNode{id: p.name, server: &server{t: t, Addr: p.ip + ":" + strconv.Itoa(resp)}, password: chartRequirePass}
	}
	waitMembers(t, nodes, replicas)
	ctx := ctxT(t)
	l := waitLeader(t, nodes)
	authClient := func(addr string) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: addr, Password: chartRequirePass, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 10 * time.Second})
		t.Cleanup(func() { c.Close() })
		return c
	}
	lc := authClient(nodes[l].Addr)
	if r, err := throttle(ctx, lc, "user:1", 0, 1, 60); err != nil || r[0] != 0 {
		t.Fatalf("CL.THROTTLE user:1 0 1 60 (first) = %v, %v; want allowed", r, err)
	}
	limited := func(via int, when string) {
		t.Helper()
		r, err := throttle(ctx, authClient(nodes[via].Addr), "user:1", 0, 1, 60)
		if err != nil || r[0] != 1 {
			t.Fatalf("%s: CL.THROTTLE user:1 via %s = %v, %v; want limited", when, pods[via].name, r, err)
		}
	}
	limited(l, "after bootstrap")

	// The last pod loses its volume.
	w := len(pods) - 1
	if w == l {
		w = 0
	}
	pods[w].kill()
	if err := os.RemoveAll(pods[w].dataDir); err != nil {
		t.Fatal(err)
	}
	pods[w].start(t, hosts)
	ready(pods[w], 60*time.Second)
	waitMembers(t, nodes, replicas)
	for i := range nodes {
		if inf := raftInfo(nodes[i]); inf["raft_leader_id"] != raftInfo(nodes[l])["raft_leader_id"] && inf["raft_leader_id"] != "" {
			t.Errorf("%s follows %s, the group %s: forked", pods[i].name, inf["raft_leader_id"], raftInfo(nodes[l])["raft_leader_id"])
		}
	}
	limited(w, "after the wiped pod rejoined")

	// Rolling restart, highest ordinal first, each pod back at its address.
	for i := len(pods) - 1; i >= 0; i-- {
		if err := pods[i].cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-pods[i].done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not stop on SIGTERM", pods[i].name)
		}
		pods[i].start(t, hosts)
		ready(pods[i], 60*time.Second)
	}
	waitMembers(t, nodes, replicas)
	limited(waitLeader(t, nodes), "after the rolling restart")

	// A rolling restart in which each pod comes back at a new IP, as
	// Kubernetes may give it: the pods advertise DNS names, resolved at
	// each dial, and a member at a new address is re-admitted by itself.
	for i := len(pods) - 1; i >= 0; i-- {
		if err := pods[i].cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		<-pods[i].done
		pods[i].ip = fmt.Sprintf("127.0.0.%d", 30+i)
		pods[i].env["POD_IP"] = pods[i].ip
		pods[i].args = pods[i].args[:0]
		for _, a := range rawArgs {
			pods[i].args = append(pods[i].args, expandK8s(a, pods[i].env))
		}
		nodes[i].Addr = pods[i].ip + ":" + strconv.Itoa(resp)
		writeHosts()
		pods[i].start(t, hosts)
		ready(pods[i], 30*time.Second)
	}
	waitMembers(t, nodes, replicas)
	limited(waitLeader(t, nodes), "after the rolling restart at new addresses")
}

// mountSecretVolumes plays the kubelet's part for the pod's Secret
// volumes that container mounts: each item of the Secret (from the
// rendered documents) is written as a file under dir, and the mount path
// is mapped to where it was written.
func mountSecretVolumes(t *testing.T, docs []map[string]any, pod, container any, dir string) map[string]string {
	t.Helper()
	secrets := map[string]map[string]any{}
	for _, d := range docs {
		if d["kind"] == "Secret" {
			secrets[dig(d, "metadata", "name").(string)] = dig(d, "stringData").(map[string]any)
		}
	}
	mounts := map[string]string{}
	for _, m := range dig(container, "volumeMounts").([]any) {
		name := dig(m, "name").(string)
		for _, v := range dig(pod, "volumes").([]any) {
			if dig(v, "name") != name || dig(v, "secret") == nil {
				continue
			}
			data, ok := secrets[fmt.Sprint(dig(v, "secret", "secretName"))]
			if !ok {
				t.Fatalf("volume %s: Secret %v not rendered", name, dig(v, "secret", "secretName"))
			}
			to := filepath.Join(dir, name)
			if err := os.MkdirAll(to, 0o700); err != nil {
				t.Fatal(err)
			}
			for _, it := range dig(v, "secret", "items").([]any) {
				val, ok := data[fmt.Sprint(dig(it, "key"))]
				if !ok {
					t.Fatalf("Secret %v has no key %v: the pod would not start", dig(v, "secret", "secretName"), dig(it, "key"))
				}
				if err := os.WriteFile(filepath.Join(to, fmt.Sprint(dig(it, "path"))), []byte(fmt.Sprint(val)), 0o400); err != nil {
					t.Fatal(err)
				}
			}
			mounts[dig(m, "mountPath").(string)] = to
		}
	}
	return mounts
}
