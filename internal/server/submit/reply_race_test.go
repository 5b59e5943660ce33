package submit_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/subjects"
)

// TestConcurrentRepliesDoNotRace: replies are sent from handler goroutines
// after micro's handler has returned, while micro reads the request to
// update its stats; under -race, refusals answered concurrently must not
// race with that (they did when replies went through micro.Request.Error,
// which writes the request).
func TestConcurrentRepliesDoNotRace(t *testing.T) {
	svcConn, _, _ := setup(t)
	// Requests from another connection, as agents send them: the service's
	// connection then orders nothing between micro and the handlers.
	nc, _ := natstest.ConnectURL(t, svcConn.ConnectedUrl())
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for i := range 400 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := []byte(fmt.Sprintf(`{"protocol":"mew/v0.4","id":"bad-%d","from":"a","kind":"mcp/withdraw"}`, i))
			if i%8 == 0 {
				body = []byte(fmt.Sprintf(`{"protocol":"mew/v0.4","id":"ok-%d","from":"a","kind":"mcp/proposal","payload":{"method":"m"}}`, i))
			}
			msg, err := nc.Request(subjects.Submit(ledger.DefaultSpace), body, 10*time.Second)
			if err != nil {
				errs <- err
				return
			}
			var res api.AppendResult
			if err := json.Unmarshal(msg.Data, &res); err != nil {
				errs <- err
				return
			}
			switch {
			case i%8 == 0 && (res.Error != nil || res.Seq == 0):
				errs <- fmt.Errorf("request %d: %s", i, msg.Data)
			case i%8 != 0 && (res.Error == nil || res.Error.Code != api.CodeMissingCorrelation || msg.Header.Get("Nats-Service-Error-Code") != "400"):
				errs <- fmt.Errorf("request %d: %s %v", i, msg.Data, msg.Header)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
