package resp

import (
	"log/slog"
	"testing"

	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/internal/setting"
)

// TestSettingsMatchTable: a built-in setting that internal/setting's table
// marks live has a CONFIG SET, and one it does not has none.
func TestSettingsMatchTable(t *testing.T) {
	cfg := DefaultConfig()
	cfg.LogLevel = new(slog.LevelVar)
	srv, err := NewServer(cfg, decide.NewLocal(nil, func() int64 { return 0 }))
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range srv.settings.Match([][]byte{[]byte("*")}) {
		name := st.Name
		spec := setting.Lookup(name)
		if spec == nil || fallbackSettings[name] {
			continue // databases, appendonly; save and dir belong to cmd
		}
		if got := st.Set != nil; got != spec.Live {
			t.Errorf("CONFIG SET %s settable = %v, want %v (the table's live)", name, got, spec.Live)
		}
	}
}
