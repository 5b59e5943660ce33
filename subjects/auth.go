package subjects

// Subjects that NATS permissions name (contract §10). They are built here, like
// every other subject, so that the permissions the ledger generates and the
// subjects its clients use cannot drift apart.

const (
	// InboxRoot is the first token of every reply inbox.
	InboxRoot = "_INBOX"
	// AllInboxes matches every reply inbox. Only the ledger's own service
	// user may subscribe to it: replies carry JetStream acknowledgements and
	// messages read from the log.
	AllInboxes = InboxRoot + ".>"
	// ServiceDiscovery matches the nats.go/micro discovery subjects
	// ($SRV.PING, $SRV.INFO, $SRV.STATS and their named forms).
	ServiceDiscovery = "$SRV.>"
	// JSAPIAll matches the whole JetStream API.
	JSAPIAll = "$JS.API.>"
	// JSAPIInfo is the JetStream account-info request.
	JSAPIInfo = "$JS.API.INFO"
	// JSAPIStreamNames and JSAPIStreamList list streams.
	JSAPIStreamNames = "$JS.API.STREAM.NAMES"
	JSAPIStreamList  = "$JS.API.STREAM.LIST"
)

// InboxPrefix returns the reply-inbox prefix of one NATS user under
// authentication: _INBOX.<user>. A client connects with
// nats.CustomInboxPrefix(InboxPrefix(user)) so that its replies (publish
// acknowledgements, submit replies, consumer deliveries) arrive on subjects
// only it may subscribe to ([InboxFilter]). The user name is encoded as a
// token.
func InboxPrefix(user string) string { return InboxRoot + "." + EncodeToken(user) }

// InboxFilter returns _INBOX.<user>.>, the subscribe permission matching
// every inbox made with InboxPrefix(user).
func InboxFilter(user string) string { return InboxPrefix(user) + ".>" }

// JSStreamAPI returns the JetStream API subject of a stream operation on
// the LEDGER stream: $JS.API.STREAM.<op>.LEDGER, where op is INFO, UPDATE,
// DELETE, PURGE, MSG.GET, MSG.DELETE, ... (as nats-server names them).
func JSStreamAPI(op string) string { return "$JS.API.STREAM." + op + "." + StreamName }

// JSDirectGet returns the direct-get subjects of the LEDGER stream:
// $JS.API.DIRECT.GET.LEDGER and $JS.API.DIRECT.GET.LEDGER.> (get by
// subject).
func JSDirectGet() []string {
	s := "$JS.API.DIRECT.GET." + StreamName
	return []string{s, s + ".>"}
}

// JSConsumerAPI returns the JetStream API subject of a consumer operation
// on a LEDGER consumer: $JS.API.CONSUMER.<op>.LEDGER.<consumer>, where op
// is CREATE, INFO, DELETE, MSG.NEXT, ... consumer "" gives the subject
// without a consumer token (the legacy ephemeral create, NAMES, LIST);
// consumer ">" matches every consumer (and, for CREATE, every filter
// suffix).
func JSConsumerAPI(op, consumer string) string {
	s := "$JS.API.CONSUMER." + op + "." + StreamName
	if consumer != "" {
		s += "." + consumer
	}
	return s
}

// JSLegacyDurableCreate returns the legacy durable-create subject of the
// LEDGER stream: $JS.API.CONSUMER.DURABLE.CREATE.LEDGER.<consumer>.
func JSLegacyDurableCreate(consumer string) string {
	return "$JS.API.CONSUMER.DURABLE.CREATE." + StreamName + "." + consumer
}

// JSAck returns the acknowledgement subjects of a LEDGER consumer:
// $JS.ACK.LEDGER.<consumer>.> (consumer ">" or "*" for all of them).
func JSAck(consumer string) string {
	if consumer == ">" {
		return "$JS.ACK." + StreamName + ".>"
	}
	return "$JS.ACK." + StreamName + "." + consumer + ".>"
}
