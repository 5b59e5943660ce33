// Command witnessdb writes the rows a litewitness database needs to
// witness one log (what litewitness's witnessctl add-log and add-key
// write; witnessctl does not build here): the log's origin at tree size 0
// and its verifier key. Tests only (package witnesskit builds it).
//
//	witnessdb -db FILE -origin ORIGIN -key VKEY
package main

import (
	"crypto/sha256"
	"encoding/base64"
	"flag"
	"fmt"
	"os"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// schema is litewitness's (filippo.io/torchwood v0.6.1
// internal/witness.OpenDB).
const schema = `
	PRAGMA strict_types = ON;
	PRAGMA foreign_keys = ON;
	CREATE TABLE IF NOT EXISTS log (
		origin TEXT PRIMARY KEY,
		tree_size INTEGER NOT NULL,
		tree_hash TEXT NOT NULL -- base64-encoded
	);
	CREATE TABLE IF NOT EXISTS key (
		origin TEXT NOT NULL,
		key TEXT NOT NULL, -- note verifier key
		FOREIGN KEY(origin) REFERENCES log(origin)
	);
`

func main() {
	db := flag.String("db", "", "litewitness database")
	origin := flag.String("origin", "", "the log's origin")
	key := flag.String("key", "", "the log's note verifier key")
	flag.Parse()
	if err := run(*db, *origin, *key); err != nil {
		fmt.Fprintln(os.Stderr, "witnessdb:", err)
		os.Exit(1)
	}
}

func run(path, origin, key string) error {
	if path == "" || origin == "" || key == "" {
		return fmt.Errorf("-db, -origin and -key are required")
	}
	conn, err := sqlite.OpenConn(path, 0)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := sqlitex.ExecScript(conn, schema); err != nil {
		return err
	}
	empty := sha256.Sum256(nil) // the RFC 6962 hash of the empty tree
	if err := sqlitex.Execute(conn, "INSERT INTO log (origin, tree_size, tree_hash) VALUES (?, 0, ?)",
		&sqlitex.ExecOptions{Args: []any{origin, base64.StdEncoding.EncodeToString(empty[:])}}); err != nil {
		return err
	}
	return sqlitex.Execute(conn, "INSERT INTO key (origin, key) VALUES (?, ?)", &sqlitex.ExecOptions{Args: []any{origin, key}})
}
