package test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// containersOf returns the containers (init containers included) of every
// pod template rendered: StatefulSets and Jobs.
func containersOf(docs []map[string]any) map[string][]any {
	out := map[string][]any{}
	for _, d := range docs {
		spec := dig(d, "spec", "template", "spec")
		if spec == nil {
			continue
		}
		name := fmt.Sprintf("%s %s", d["kind"], dig(d, "metadata", "name"))
		for _, k := range []string{"initContainers", "containers"} {
			if l, ok := dig(spec, k).([]any); ok {
				out[name] = append(out[name], l...)
			}
		}
	}
	return out
}

// argsOf returns a container's args (or command) as one line.
func argsOf(c any) string {
	var words []string
	for _, k := range []string{"command", "args"} {
		if l, ok := dig(c, k).([]any); ok {
			for _, a := range l {
				words = append(words, fmt.Sprint(a))
			}
		}
	}
	return strings.Join(words, " ")
}

// Two groups given by name alone (lists given with --set replace the
// default list, so no replicas comes with them): every group gets 3
// members, --bootstrap-expect 3 and a --join of its three pods, instead of
// replicas null and empty flags with which the pods exit.
func TestHelmGroupsWithoutReplicas(t *testing.T) {
	helm := helmBinary(t)
	docs := renderChart(t, helm, "groups[0].name=a", "groups[1].name=b")
	n := 0
	for _, d := range docs {
		if d["kind"] != "StatefulSet" {
			continue
		}
		n++
		name := dig(d, "metadata", "name")
		if r := dig(d, "spec", "replicas"); r != 3 {
			t.Errorf("%s: replicas %v, want 3", name, r)
		}
		args := argsOf(dig(d, "spec", "template", "spec", "containers", 0))
		if !strings.Contains(args, "--bootstrap-expect 3 ") {
			t.Errorf("%s: args %s: want --bootstrap-expect 3", name, args)
		}
		m := regexp.MustCompile(`--join (\S*)`).FindStringSubmatch(args)
		if m == nil || len(strings.Split(m[1], ",")) != 3 || strings.Contains(m[1], ",,") {
			t.Errorf("%s: args %s: want --join with the group's 3 pods", name, args)
		}
	}
	if n != 2 {
		t.Errorf("%d StatefulSets rendered, want 2", n)
	}
}

// Values a pod cannot run with fail the render with a message naming what
// to set, instead of pods that exit or never pull.
func TestHelmRefusesBadValues(t *testing.T) {
	helm := helmBinary(t)
	image := "image.repository=" + chartImage
	auth := "auth.existingSecret=cell-auth"
	for _, tt := range []struct {
		set  []string
		want string
	}{
		{[]string{image}, "auth: set auth.existingSecret"},
		{[]string{image, "auth.requirepass=x"}, "auth: set auth.existingSecret"},
		{[]string{auth}, "image.repository: set it to where you pushed the cellserver image"},
		{[]string{image, auth, "groups[0].name=a", "groups[0].replicas=0"}, "/groups/0/replicas"},
		{[]string{image, auth, "groups[0].name=a", "groups[0].replica=3"}, "additional properties 'replica' not allowed"},
		{[]string{image, auth, "groups[0].name=Bad_Name"}, "/groups/0/name"},
		{[]string{image, auth, "groups[0].replicas=3"}, "missing property 'name'"},
		{[]string{image, auth, "groups[0].name=a", "groups[1].name=a"}, `groups: the name "a" is given twice`},
		{[]string{image, auth, "ports.resp=0"}, "/ports/resp"},
		{[]string{image, auth, "config.requirepass=x"}, "config.requirepass: a secret must not be a flag"},
		{[]string{image, auth, "extraArgs[0]=--cluster-secret=x"}, "extraArgs: --cluster-secret: a secret must not be a flag"},
		{[]string{image, auth, "tls.enabled=true"}, "tls.secretName is required"},
	} {
		out, err := helmTemplate(helm, setFlags(tt.set...)...)
		if err == nil || !strings.Contains(string(out), tt.want) {
			t.Errorf("helm template --set %s: %v\n%s\nwant a failure saying %q", strings.Join(tt.set, " --set "), err, out, tt.want)
		}
	}
}

// No secret stands in any container's command line or environment (ps,
// /proc/PID/cmdline and /debug/pprof/cmdline show the one, the pod's spec
// the other's source): the server reads them from the Secret mounted as
// files, and every container that needs one mounts it with both keys
// required (no optional: a missing key stops the pod, it does not leave a
// literal $(VAR) as the password).
func TestHelmNoSecretsInArgs(t *testing.T) {
	helm := helmBinary(t)
	for _, set := range [][]string{nil, {"groups[0].name=a", "groups[1].name=b"}, {"auth.existingSecret=cell-auth"}} {
		docs := renderChart(t, helm, set...)
		for name, cs := range containersOf(docs) {
			for _, c := range cs {
				args := argsOf(c)
				env, _ := yaml.Marshal(dig(c, "env"))
				for _, secret := range []string{chartRequirePass, chartClusterSecret} {
					if strings.Contains(args, secret) || strings.Contains(string(env), secret) {
						t.Errorf("%v %s: a secret in the container's args or env: %s", set, name, args)
					}
				}
				if strings.Contains(args, "$(") && regexp.MustCompile(`\$\([A-Z_]*(PASS|SECRET)[A-Z_]*\)`).MatchString(args) {
					t.Errorf("%v %s: args expand a secret from the environment: %s", set, name, args)
				}
				if strings.Contains(string(env), "secretKeyRef") {
					t.Errorf("%v %s: env from a Secret:\n%s", set, name, env)
				}
				for _, f := range []string{"--requirepass ", "--cluster-secret "} {
					if strings.Contains(args+" ", f) {
						t.Errorf("%v %s: args pass %s: %s", set, name, f, args)
					}
				}
				if strings.HasPrefix(name, "StatefulSet") && (!strings.Contains(args, "--requirepass-file /run/secrets/cellserver/requirepass") || !strings.Contains(args, "--cluster-secret-file /run/secrets/cellserver/cluster-secret")) {
					t.Errorf("%v %s: args %s: want --requirepass-file and --cluster-secret-file", set, name, args)
				}
			}
		}
		for _, d := range docs {
			vols, _ := dig(d, "spec", "template", "spec", "volumes").([]any)
			for _, v := range vols {
				if dig(v, "secret") != nil && dig(v, "secret", "optional") == true {
					t.Errorf("%v %s %v: Secret volume %v is optional", set, d["kind"], dig(d, "metadata", "name"), dig(v, "name"))
				}
			}
		}
	}
}

// The slot Job runs on install and on upgrade (a group added by helm
// upgrade is joined), with the cellserver image the StatefulSets run, not
// an image pulled from elsewhere; one group needs no Job.
func TestHelmSlotJobHook(t *testing.T) {
	helm := helmBinary(t)
	for _, d := range renderChart(t, helm) {
		if d["kind"] == "Job" {
			t.Errorf("one group renders a Job %v", dig(d, "metadata", "name"))
		}
	}
	flags := append(setFlags(append(append([]string{}, chartBase...), "groups[0].name=a", "groups[1].name=b")...), "--is-upgrade")
	docs := renderChartFlags(t, helm, flags...)
	images := map[string]bool{}
	var job map[string]any
	for _, d := range docs {
		switch d["kind"] {
		case "StatefulSet":
			images[fmt.Sprint(dig(d, "spec", "template", "spec", "containers", 0, "image"))] = true
		case "Job":
			job = d
		}
	}
	if job == nil {
		t.Fatal("two groups on upgrade render no Job")
	}
	hooks := strings.Split(fmt.Sprint(dig(job, "metadata", "annotations", "helm.sh/hook")), ",")
	if !strings.Contains(","+strings.Join(hooks, ",")+",", ",post-install,") || !strings.Contains(","+strings.Join(hooks, ",")+",", ",post-upgrade,") {
		t.Errorf("slot Job hooks %v: want post-install and post-upgrade", hooks)
	}
	for _, c := range containersOf([]map[string]any{job})["Job t-cellserver-slots"] {
		img := fmt.Sprint(dig(c, "image"))
		if !images[img] || !strings.HasPrefix(img, chartImage+":") {
			t.Errorf("slot Job image %s, want the StatefulSets' %v", img, images)
		}
		if args := argsOf(c); !strings.Contains(args, "--assign-slots ") || !strings.Contains(args, "--requirepass-file ") {
			t.Errorf("slot Job args %s: want --assign-slots and --requirepass-file", args)
		}
	}
	if l := dig(job, "spec", "template", "metadata", "labels", "app.kubernetes.io/name"); l == "cellserver" {
		t.Errorf("slot Job pod labelled app.kubernetes.io/name=%v: the client Service would route clients to it", l)
	}
}
