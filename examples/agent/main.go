// Command agent is an agent written outside the ledger's module: it
// imports only github.com/mewledger/ledger/client, proposes an operation,
// and reads back what the ledger made of it.
//
//	go run . -api http://127.0.0.1:8080
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"time"

	"github.com/mewledger/ledger/client"
)

func main() {
	api := flag.String("api", client.DefaultAPI, "the ledger's HTTP API")
	id := flag.String("id", fmt.Sprintf("agent-%d", time.Now().UnixNano()), "proposal id")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	c, err := client.New(*api)
	if err != nil {
		log.Fatal(err)
	}
	ack, err := c.Append(ctx, []byte(`{"protocol":"mew/v0.4","id":"`+*id+`","from":"outside-agent","to":["fs-agent"],
		"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"name":"read_file","arguments":{"path":"README.md"}}}}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("proposed %s: stored at seq %d\n", ack.ID, ack.Seq)
	p, err := c.Get(ctx, ack.ID, client.WithMinSeq(ack.Seq))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s is %s, proposed by %s to %v\n", p.ID, p.State, p.Proposer, p.To)
}
