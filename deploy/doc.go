// Package deploy holds the ledger's deployment examples (nats-server
// configurations, the worked auth example, systemd, docker-compose and
// Kubernetes files) and, in its test, the checks that keep them parseable
// and in step with the code: every YAML and JSON file parses, every nats
// .conf file parses with nats-server's own parser and sets what the ledger
// needs, and the generated auth/nats-auth.conf matches auth/ledger-auth.yaml.
// It has no code of its own.
package deploy
