package authcfg

// Parse parses and validates a configuration; relative secret-file paths
// are resolved against dir. Only tests parse from memory: the ledger
// loads a file (Load).
func Parse(data []byte, dir string) (*Config, error) { return parse(data, dir, "") }
