package bridge

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// ErrConfig is wrapped by configuration-file errors.
var ErrConfig = errors.New("bridge: invalid configuration")

// Config is the file of `ledger serve --bridge-mew-config FILE`: the MEW
// spaces the ledger records, one bridge each, run inside the server and
// appending through its own Appender.
//
//	bridges:
//	  - mew_space: my-space              # space.id of the MEW space (required)
//	    gateway: ws://127.0.0.1:8080     # its gateway (required without history)
//	    participant: ledger-recorder     # the bridge's id in the space (required, unique there)
//	    token_file: /etc/ledger/mew-recorder.token   # its MEW token (relative: to this file)
//	    space: my-space                  # ledger space (default: mew_space)
//	    history: /srv/space/.mew/logs/envelope-history.jsonl  # follow the gateway's log instead
//	    probe_interval: 1s               # ping and eviction probe (GET /participants); negative: off
//	    echo_after: 1s                   # silence before the echo check (own message through the gateway); negative: off
//	    backoff_min: 250ms
//	    backoff_max: 4s
//	    max_backlog_mib: 64              # bound of the envelopes received and not yet stored
//	    batch: 1000                      # most envelopes of one append
type Config struct {
	Bridges []BridgeConfig `yaml:"bridges"`
}

// BridgeConfig is one bridge of a Config.
type BridgeConfig struct {
	MEWSpace      string        `yaml:"mew_space"`
	Gateway       string        `yaml:"gateway"`
	Participant   string        `yaml:"participant"`
	TokenFile     string        `yaml:"token_file"`
	Space         string        `yaml:"space"`
	History       string        `yaml:"history"`
	ProbeInterval time.Duration `yaml:"probe_interval"`
	EchoAfter     time.Duration `yaml:"echo_after"`
	BackoffMin    time.Duration `yaml:"backoff_min"`
	BackoffMax    time.Duration `yaml:"backoff_max"`
	MaxBacklogMiB int           `yaml:"max_backlog_mib"`
	Batch         int           `yaml:"batch"`
}

// LoadConfig reads and checks a configuration file: unknown fields,
// missing required ones, an unreadable token file, and two bridges with
// the same participant in the same MEW space are errors naming the entry
// (bridges[1].token_file). Relative paths are relative to the file.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrConfig, path, err)
	}
	if len(c.Bridges) == 0 {
		return nil, fmt.Errorf("%w: %s: no bridges", ErrConfig, path)
	}
	dir := filepath.Dir(path)
	seen := map[[2]string]int{}
	for i := range c.Bridges {
		b := &c.Bridges[i]
		bad := func(field, format string, args ...any) error {
			return fmt.Errorf("%w: %s: bridges[%d].%s: %s", ErrConfig, path, i, field, fmt.Sprintf(format, args...))
		}
		switch {
		case b.MEWSpace == "":
			return nil, bad("mew_space", "required (space.id of the MEW space's space.yaml)")
		case b.Participant == "":
			return nil, bad("participant", "required (the bridge's participant id, unique in the space)")
		case b.Gateway == "" && b.History == "":
			return nil, bad("gateway", "required (ws://HOST:PORT), unless history is given")
		case b.TokenFile == "" && b.History == "":
			return nil, bad("token_file", "required: the participant's MEW token")
		}
		key := [2]string{b.MEWSpace, b.Participant}
		if j, ok := seen[key]; ok {
			return nil, bad("participant", "%q in MEW space %q is also bridges[%d]: two bridges under one name evict each other", b.Participant, b.MEWSpace, j)
		}
		seen[key] = i
		for _, p := range []*string{&b.TokenFile, &b.History} {
			if *p != "" && !filepath.IsAbs(*p) {
				*p = filepath.Join(dir, *p)
			}
		}
		if b.TokenFile != "" {
			if _, err := ReadToken(b.TokenFile); err != nil {
				return nil, bad("token_file", "%v", err)
			}
		}
	}
	return &c, nil
}

// ReadToken reads a token file: its content without surrounding white
// space; an empty file is an error.
func ReadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return tok, nil
}

// Options returns the bridge's options (without Sink, Metrics and
// Logger, which the caller sets).
func (b BridgeConfig) Options() (Options, error) {
	o := Options{Gateway: b.Gateway, MEWSpace: b.MEWSpace, Participant: b.Participant, Space: b.Space,
		HistoryFile: b.History, ProbeInterval: b.ProbeInterval, EchoAfter: b.EchoAfter, BackoffMin: b.BackoffMin, BackoffMax: b.BackoffMax,
		MaxBacklogBytes: b.MaxBacklogMiB << 20, BatchSize: b.Batch}
	if b.TokenFile != "" {
		tok, err := ReadToken(b.TokenFile)
		if err != nil {
			return o, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		o.Token = tok
	}
	return o, nil
}
