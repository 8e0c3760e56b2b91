package test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// pythonPackages are the modules clients/python's tests import: redis-py
// for the package, the web frameworks and pytest for its tests (Debian's
// python3-redis, python3-starlette, python3-uvicorn, python3-httpx,
// python3-flask and python3-pytest, which scripts/test.sh installs).
var pythonPackages = []string{"redis", "starlette", "uvicorn", "httpx", "flask", "pytest"}

// pythonWithWeb returns a Python interpreter that can import every module
// of pythonPackages, or skips naming what is missing.
func pythonWithWeb(t *testing.T) string {
	t.Helper()
	var missing string
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if _, err := exec.LookPath(py); err != nil {
			continue
		}
		args := append([]string{"-c", `
import importlib.util, sys
print(" ".join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))
`}, pythonPackages...)
		out, err := exec.Command(py, args...).Output()
		if err != nil {
			continue
		}
		if m := strings.TrimSpace(string(out)); m != "" {
			if missing == "" {
				missing = py + " lacks " + m
			}
			continue
		}
		return py
	}
	if missing == "" {
		missing = "no python3"
	}
	t.Skipf("%s (scripts/test.sh installs python3-redis, python3-starlette, python3-uvicorn, python3-httpx, python3-flask and python3-pytest)", missing)
	return ""
}

// TestPythonClient runs clients/python's pytest suite against the real
// binary: the Limiter (sync and asyncio), the ASGI and WSGI middlewares,
// the deny cache, fail-open and fail-closed on a closed port, the shared
// field table, examples/python/app.py and the Python section of
// docs/http.md. Any failing pytest test fails this test.
func TestPythonClient(t *testing.T) {
	py := pythonWithWeb(t)
	s := startServer(t)
	cmd := exec.Command(py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "clients/python/tests")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CELLSERVER_ADDR="+s.Addr, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pytest clients/python/tests: %v\n%s", err, out)
	}
	// A suite that skipped its server tests would pass without testing.
	if strings.Contains(string(out), "skipped") {
		t.Fatalf("pytest skipped tests although CELLSERVER_ADDR is set:\n%s", out)
	}
	t.Logf("pytest: %s", pytestSummary(string(out)))
}

// pytestSummary is the last non-empty line of pytest's output: its summary.
func pytestSummary(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
