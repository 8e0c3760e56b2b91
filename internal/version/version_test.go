package version

import (
	"fmt"
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	for _, tc := range []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"go install at a tag", debug.BuildInfo{Main: debug.Module{Version: "v0.2.0"}}, "0.2.0"},
		{"tag, modified tree", debug.BuildInfo{Main: debug.Module{Version: "v0.2.0+dirty"}}, "0.2.0"},
		{"no VCS information", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, base + "-dev"},
		{"git checkout", debug.BuildInfo{
			Main:     debug.Module{Version: "v0.0.0-20261127012243-2222590abcdef"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "2222590abcdef0123456789"}, {Key: "vcs.modified", Value: "false"}},
		}, base + "-dev+2222590abcde"},
		{"modified checkout", debug.BuildInfo{
			Main:     debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "2222590"}, {Key: "vcs.modified", Value: "true"}},
		}, base + "-dev+2222590.dirty"},
	} {
		if got := fromBuildInfo(&tc.bi); got != tc.want {
			t.Errorf("%s: fromBuildInfo = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// A test binary carries build information, so String never returns an
// empty or unparseable version.
func TestStringStartsWithRelease(t *testing.T) {
	v := String()
	var a, b, c int
	if n, _ := fmt.Sscanf(v, "%d.%d.%d", &a, &b, &c); n != 3 {
		t.Errorf("String() = %q, want major.minor.patch first", v)
	}
}
