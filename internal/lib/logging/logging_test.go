package logging_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mewledger/ledger/internal/lib/logging"
)

func TestFormats(t *testing.T) {
	var buf bytes.Buffer
	// Auto on a non-terminal writer is JSON.
	log, err := logging.New(logging.Options{Out: &buf})
	if err != nil {
		t.Fatal(err)
	}
	log.Info().Str(logging.KeyHTTPAddr, "127.0.0.1:1").Msg("hello")
	log.Debug().Msg("not at info")
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("auto format on a buffer is not JSON: %q", buf.String())
	}
	if m["message"] != "hello" || m[logging.KeyHTTPAddr] != "127.0.0.1:1" || m["time"] == nil || m["level"] != "info" {
		t.Fatalf("line %v", m)
	}

	buf.Reset()
	log, err = logging.New(logging.Options{Out: &buf, Format: "console", Level: "debug"})
	if err != nil {
		t.Fatal(err)
	}
	log.Debug().Str("k", "v").Msg("shown")
	if out := buf.String(); !strings.Contains(out, "DBG") || !strings.Contains(out, "shown") || strings.Contains(out, "\x1b[") {
		t.Fatalf("console line %q (no colours off a terminal)", out)
	}

	for _, o := range []logging.Options{{Format: "xml"}, {Level: "loud"}} {
		if _, err := logging.New(o); !errors.Is(err, logging.ErrOptions) {
			t.Errorf("%+v: %v, want ErrOptions", o, err)
		}
	}
}
