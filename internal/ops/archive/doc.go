// Package archive exports the LEDGER stream as a hash-chained JSON-lines
// file, verifies such a file, and imports it into a ledger (contract §9).
//
// # Format (version 1)
//
// One JSON object per line, one line per stored message, in stream order:
//
//	{"seq":12,"time":"2026-01-02T03:04:05.123456789Z","subject":"ledger.default.p1.proposal.alice","headers":{"Nats-Msg-Id":["default/p1/…"]},"raw":"{\"protocol\":…}","hash":"9f86d0…"}
//
// The fields:
//
//   - seq: the message's stream sequence (its position in the ledger).
//   - time: the ledger's time for it, RFC 3339 with nanoseconds, UTC: the
//     stream timestamp, or for a message that was itself imported, the
//     original time it carries (ledger.EventTime), so that an export of an
//     imported ledger has the seq, time, subject and raw bytes of the
//     original's (its headers, and so its hashes, differ: see Import).
//   - subject: the subject it is stored under.
//   - headers: every header of the stored message, name → values.
//   - raw: the stored bytes as a JSON string when they are valid UTF-8
//     (envelopes always are); otherwise raw_b64, standard base64 with
//     padding. Exactly one of the two is present.
//   - hash: lower-case hex SHA-256 chaining this line to the previous one.
//
// # Hash chain
//
// Every variable-length field is preceded by its length as an unsigned
// 64-bit big-endian integer (written u64 below), so that no two different
// lines hash the same input:
//
//	H(0) = 32 zero bytes
//	H(n) = SHA-256( H(n-1)                      32 bytes, the previous line's hash
//	              ‖ u64(seq)
//	              ‖ u64(len(time))    ‖ time     the "time" string exactly as written
//	              ‖ u64(len(subject)) ‖ subject
//	              ‖ u64(number of header names)
//	                ‖ for each name, in increasing byte order:
//	                    u64(len(name)) ‖ name ‖ u64(number of values)
//	                    ‖ for each value, in order: u64(len(value)) ‖ value
//	              ‖ u64(len(raw))     ‖ raw )    the message bytes (decoded from raw or raw_b64)
//
// The first line of a file chains to H(0) whatever its seq, so a range
// export verifies on its own. Decisions beyond the issue's formula
// (sha256(prev ‖ seq ‖ subject ‖ raw)): the time is covered because the
// fold reads it (created_at, deadlines, expiry), and the headers are
// covered because an import writes them back into the stream, so an edited
// header would otherwise put bytes into the ledger that it never held.
//
// A chain detects any change, insertion, removal or reordering of lines
// before the last one. It cannot by itself detect lines cut off at the
// end: Export returns the last line's hash (Summary.Head), which an
// operator keeps alongside the file (the CLI prints it) and compares with
// VerifyChain's.
//
// # Import
//
// Import verifies the whole file before writing anything, then republishes
// every line to its original subject with its original headers, except
// that server-interpreted headers (Nats-*) are not sent as they were: the
// original Nats-Msg-Id is kept as Ledger-Original-Msg-Id, and the import's
// own Nats-Msg-Id is "import/<original seq>/<line hash>". See [Import] for
// why, and for how original times and sequences are reproduced.
package archive
