package main

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/lib/datalock"
	"github.com/mewledger/ledger/internal/server/app"
)

// Which ledger a client command talks to, one rule for all of them:
//  1. --api;
//  2. LEDGER_API;
//  3. the `ledger serve` running on --data (LEDGER_DATA, default ./data):
//     the HTTP address in its serve.addr.json, so that a ledger started on
//     another port (LEDGER_HTTP, --http) is found from the same directory;
//  4. the default, http://127.0.0.1:8080.
//
// The which-ledger line says which one applied.

// resolveAPI applies the rule after the flags are parsed.
func (c *clientOpts) resolveAPI() error {
	if c.f.source("api") != "default" {
		c.apiSource = c.f.source("api")
		return nil
	}
	if addr, ok := runningServe(c.data); ok && addr.HTTP != "" {
		c.apiURL = "http://" + addr.HTTP
		c.apiSource = "the ledger serve running on " + c.data + ", " + c.f.source("data")
		return nil
	}
	c.apiSource = "default"
	return nil
}

// runningServe returns what <data>/serve.addr.json says when a `ledger
// serve` runs on data: the file is there and someone holds the directory's
// lock (a file left by a killed process is not believed).
func runningServe(data string) (api.Addr, bool) {
	b, err := os.ReadFile(filepath.Join(data, app.AddrFileName))
	if err != nil {
		return api.Addr{}, false
	}
	if _, held := datalock.Holder(data); !held {
		return api.Addr{}, false
	}
	var a api.Addr
	if json.Unmarshal(b, &a) != nil {
		return api.Addr{}, false
	}
	return a, true
}
