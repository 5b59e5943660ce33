package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/lib/logging"
)

// The proposal resource: ledger://{space}/proposals/{id}, the proposal
// object as JSON. Space and id are percent-encoded where they hold
// characters a URI segment cannot (RFC 6570 simple expansion).
const (
	ResourceTemplate = "ledger://{space}/proposals/{id}"
	resourceScheme   = "ledger://"
	resourceMIME     = "application/json"
)

// ProposalURI is the resource URI of a proposal: space and id expanded
// as RFC 6570 simple strings (every byte but the unreserved A-Z a-z 0-9
// - . _ ~ percent-encoded), so the URI matches the template.
func ProposalURI(space, id string) string {
	return resourceScheme + escape(space) + "/proposals/" + escape(id)
}

func escape(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// parseURI returns the space and id of a proposal resource URI.
func parseURI(uri string) (space, id string, err error) {
	rest, ok := strings.CutPrefix(uri, resourceScheme)
	if !ok {
		return "", "", fmt.Errorf("mcp: resource %q: want %s", uri, ResourceTemplate)
	}
	sp, i, ok := strings.Cut(rest, "/proposals/")
	if !ok || sp == "" || i == "" || strings.Contains(i, "/") {
		return "", "", fmt.Errorf("mcp: resource %q: want %s", uri, ResourceTemplate)
	}
	if space, err = url.PathUnescape(sp); err != nil {
		return "", "", fmt.Errorf("mcp: resource %q: space: %w", uri, err)
	}
	if id, err = url.PathUnescape(i); err != nil {
		return "", "", fmt.Errorf("mcp: resource %q: id: %w", uri, err)
	}
	return space, id, nil
}

func (s *Server) addResources() {
	s.srv.AddResourceTemplate(&sdk.ResourceTemplate{
		Name:        "proposal",
		Title:       "A proposal of the ledger",
		URITemplate: ResourceTemplate,
		MIMEType:    resourceMIME,
		Description: "One proposal's projected state (the API's proposal object) as JSON. Subscribe to be notified (notifications/resources/updated) when its state or anomalies change.",
	}, s.readProposal)
}

func (s *Server) readProposal(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	space, id, err := parseURI(req.Params.URI)
	if err != nil {
		return nil, err
	}
	raw, err := s.c.GetRaw(s.callerCtx(ctx, req.Extra, req.Session), id, client.ReadOptions{Space: space})
	if errors.Is(err, api.ErrNotFound) {
		return nil, sdk.ResourceNotFoundError(req.Params.URI)
	}
	if err != nil {
		return nil, s.toolError(err)
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: resourceMIME, Text: string(raw)}}}, nil
}

// Subscriptions. Each subscription (a session and a URI) belongs to the
// watcher of its space and caller's Authorization (one /v1/watch stream
// per pair, started with the first subscription and cancelled with the
// last). A change the watcher sees for a subscribed id is sent as
// notifications/resources/updated to the URI's subscribers (the SDK keeps
// which sessions those are). Sessions that went away without
// unsubscribing are pruned on every subscribe and every change.

type watchKey struct{ space, auth string }

type subKey struct {
	session *sdk.ServerSession
	uri     string
}

type watcher struct {
	cancel context.CancelFunc
	ids    map[string]int // subscribed id → subscriptions
	uris   map[string]string
}

func (s *Server) subscribe(ctx context.Context, req *sdk.SubscribeRequest) error {
	space, id, err := parseURI(req.Params.URI)
	if err != nil {
		return err
	}
	cctx := s.callerCtx(ctx, req.Extra, req.Session)
	// The subscriber must be allowed to read the proposal (its token's
	// roles and spaces, checked by the API), and it must exist.
	p, err := s.c.Get(cctx, id, client.ReadOptions{Space: space})
	if errors.Is(err, api.ErrNotFound) {
		return sdk.ResourceNotFoundError(req.Params.URI)
	}
	if err != nil {
		return s.toolError(err)
	}
	key := watchKey{space: p.Space, auth: authorization(cctx)}
	since := s.since(cctx, p)
	sk := subKey{session: req.Session, uri: req.Params.URI}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.pruneLocked()
	if _, ok := s.subs[sk]; ok {
		return nil // subscribed already
	}
	if len(s.subs) >= s.opts.MaxSubscriptions {
		return fmt.Errorf("too_many_subscriptions: this server holds %d resource subscriptions, its maximum; unsubscribe first", len(s.subs))
	}
	// One caller's: its Authorization; without one (open mode), the
	// share its session was counted against (the local program).
	callerOf := func(sk subKey, k watchKey) string {
		if k.auth == "" && s.shareOf != nil && sk.session != nil {
			if sh := s.shareOf(sk.session.ID()); sh != "" {
				return "share:" + sh
			}
		}
		return "auth:" + k.auth
	}
	me, mine := callerOf(sk, key), 0
	for osk, k := range s.subs {
		if callerOf(osk, k) == me {
			mine++
		}
	}
	if mine >= s.opts.MaxSubscriptionsPerCaller {
		return fmt.Errorf("too_many_subscriptions: this caller holds %d resource subscriptions, the most one caller may; unsubscribe first", mine)
	}
	w := s.watchers[key]
	if w == nil {
		// Start where the read left off: every change after the state
		// the subscriber was allowed to see is delivered. A change
		// between the read and the subscription's registration by the
		// SDK can still be announced before the session is listed.
		w = &watcher{ids: map[string]int{}, uris: map[string]string{}}
		var wctx context.Context
		wctx, w.cancel = context.WithCancel(WithAuthorization(s.ctx, key.auth))
		s.watchers[key] = w
		s.wg.Add(1)
		go s.watch(wctx, key, w, since)
	}
	w.ids[id]++
	w.uris[id] = req.Params.URI
	s.subs[sk] = key
	return nil
}

// since is where a new watcher starts: the projection's checkpoint as the
// change index says (GET /v1/changes after the proposal's last change),
// or the proposal's last change when that cannot be read.
func (s *Server) since(ctx context.Context, p *api.Proposal) uint64 {
	q := url.Values{"space": {p.Space}, "proposal": {p.ID}, "since_seq": {strconv.FormatUint(p.UpdatedSeq, 10)}, "limit": {"1"}}
	var page api.ChangesPage
	if err := s.c.Do(ctx, http.MethodGet, "/v1/changes", q, nil, "", false, &page); err != nil || len(page.Changes) > 0 || page.More {
		return p.UpdatedSeq
	}
	return page.Through
}

// Subscriptions returns the number of resource subscriptions held, and of
// watch streams serving them (after dropping those of ended sessions).
func (s *Server) Subscriptions() (subs, watchers int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneLocked()
	return len(s.subs), len(s.watchers)
}

func (s *Server) unsubscribe(_ context.Context, req *sdk.UnsubscribeRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropLocked(subKey{session: req.Session, uri: req.Params.URI})
	s.pruneLocked()
	return nil
}

// dropLocked removes one subscription, and its watcher with the last.
func (s *Server) dropLocked(sk subKey) {
	key, ok := s.subs[sk]
	if !ok {
		return
	}
	delete(s.subs, sk)
	w := s.watchers[key]
	if w == nil {
		return
	}
	_, id, err := parseURI(sk.uri)
	if err == nil {
		if w.ids[id]--; w.ids[id] <= 0 {
			delete(w.ids, id)
			delete(w.uris, id)
		}
	}
	if len(w.ids) == 0 {
		w.cancel()
		delete(s.watchers, key)
	}
}

// pruneLocked drops the subscriptions of sessions that have ended.
func (s *Server) pruneLocked() {
	if len(s.subs) == 0 {
		return
	}
	live := map[*sdk.ServerSession]bool{}
	for ss := range s.srv.Sessions() {
		live[ss] = true
	}
	for sk := range s.subs {
		if !live[sk.session] {
			s.dropLocked(sk)
		}
	}
}

// watch follows a space's changes for the watcher's subscriptions until
// its ctx ends (its last subscription went, or Close).
func (s *Server) watch(ctx context.Context, key watchKey, w *watcher, since uint64) {
	defer s.wg.Done()
	log := s.log.With().Str(logging.KeySpace, key.space).Logger()
	log.Debug().Uint64(logging.KeySeq, since).Msg("resource watcher started")
	err := s.c.WatchFunc(ctx, client.WatchOptions{Space: key.space, SinceSeq: since, FromStart: true, Retry: s.opts.WatchRetry},
		func(ch api.Change, _ []byte) error {
			s.mu.Lock()
			s.pruneLocked()
			uri, ok := w.uris[ch.ID]
			s.mu.Unlock()
			if ok {
				if err := s.srv.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
					log.Debug().Err(err).Str("uri", uri).Msg("resource update not sent")
				}
			}
			return nil
		})
	if err != nil && ctx.Err() == nil {
		// The ledger refused the stream (a token that lost its role, a
		// space that does not parse): the subscriptions stay, silent.
		log.Warn().Err(err).Msg("resource watcher ended: subscribers of this space get no more updates")
	}
}
