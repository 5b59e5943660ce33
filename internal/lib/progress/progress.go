// Package progress reports the progress of long operations (rebuild,
// export, import, replay, publish): a one-line progress bar when the
// output is a terminal (percent, bar, events done, one rate in events/s,
// ETA; see Render), and otherwise one zerolog line every few seconds
// (done, total, percent, events, rate, ETA), so that logs of a job or a
// pipe are not flooded with carriage returns.
//
// One rate: the position of an operation may be counted in another unit
// than events (publish -f counts the bytes of its file, which give the
// percent and the ETA), but the only rate shown is events per second,
// averaged since the first update.
//
// Contract: New starts at most one goroutine (the periodic logger, in log
// mode), which Finish stops and waits for; Finish must be called exactly
// once, from the goroutine that owns the Reporter or any other. Update and
// Finish are safe for concurrent use. A nil *Reporter is valid and reports
// nothing, so callers may pass one around unconditionally.
package progress

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/term"
)

// DefaultInterval is how often the log mode writes a line.
const DefaultInterval = 5 * time.Second

// redraw is the least time between two drawings of the bar.
const redraw = 100 * time.Millisecond

// barWidth is the bar's width in cells.
const barWidth = 30

// Mode selects how progress is shown.
type Mode int

// Modes.
const (
	// Auto is Bar when Out is a terminal, Log otherwise.
	Auto Mode = iota
	// Bar draws a progress bar on Out.
	Bar
	// Log writes a zerolog line every Interval.
	Log
	// Off reports nothing.
	Off
)

// Options configures a Reporter.
type Options struct {
	// Description names the operation ("rebuild", "export", ...).
	Description string
	// Unit names what done and total count (default "events"). When it
	// is not "events" (publish -f counts bytes), the caller reports the
	// events done with Events: the rate is always events per second.
	Unit string
	// Out is where the bar is drawn; default os.Stderr.
	Out io.Writer
	// Logger receives the log-mode lines and the final line.
	Logger zerolog.Logger
	// Mode: default Auto.
	Mode Mode
	// Interval between log lines; default DefaultInterval.
	Interval time.Duration
}

// Reporter shows the progress of one operation.
type Reporter struct {
	o     Options
	start time.Time

	mu           sync.Mutex
	done, total  uint64
	first        uint64 // done at the first update (a resumed operation)
	events       uint64 // events done (done itself when Unit is events)
	firstEvents  uint64
	firstAt      time.Time // of the first update: the rate is since then
	drawnAt      time.Time
	width        int // of the last line drawn, to clear it
	started      bool
	finished     bool
	stop, exited chan struct{}
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// New returns a Reporter for an operation of total units (0 when unknown
// yet; Update may change it).
func New(total uint64, o Options) *Reporter {
	if o.Out == nil {
		o.Out = os.Stderr
	}
	if o.Unit == "" {
		o.Unit = "events"
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Mode == Auto {
		o.Mode = Log
		if IsTerminal(o.Out) {
			o.Mode = Bar
		}
	}
	r := &Reporter{o: o, total: total, start: time.Now()}
	switch o.Mode {
	case Log:
		r.stop, r.exited = make(chan struct{}), make(chan struct{})
		go r.logLoop()
	}
	return r
}

// Update records that done of total units are complete (total 0 keeps the
// previous total).
func (r *Reporter) Update(done, total uint64) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.finished {
		return
	}
	if !r.started {
		r.started, r.first, r.firstEvents, r.firstAt = true, done, r.eventsLocked(done), time.Now()
	}
	if total > 0 {
		r.total = total
	}
	r.done = done
	r.drawLocked(false)
}

// Events records the events done, for a Reporter whose Unit is not
// events (it is done itself otherwise). Call it before the Update of the
// same step.
func (r *Reporter) Events(n uint64) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = n
}

// eventsLocked is the count of events, given the position done.
func (r *Reporter) eventsLocked(done uint64) uint64 {
	if r.o.Unit == "events" {
		return done
	}
	return r.events
}

// drawLocked draws the bar (Bar mode) at most every redraw, or now when
// final.
func (r *Reporter) drawLocked(final bool) {
	if r.o.Mode != Bar {
		return
	}
	now := time.Now()
	if !final && now.Sub(r.drawnAt) < redraw {
		return
	}
	r.drawnAt = now
	var el time.Duration
	if r.started {
		el = now.Sub(r.firstAt)
	}
	line := Render(r.o.Description, r.done, r.total, r.eventsLocked(r.done)-r.firstEvents, r.eventsLocked(r.done), r.done-r.first, el)
	pad := ""
	if n := len([]rune(line)); n < r.width {
		pad = strings.Repeat(" ", r.width-n)
	}
	r.width = len([]rune(line))
	_, _ = io.WriteString(r.o.Out, "\r"+line+pad)
}

// Render is the bar's line: the description, the percent and a bar when
// the total is known, the events done, one rate (events per second over
// elapsed, of the eventsSince counted since the first update), and the
// ETA (from the position: progressed units of done since the first
// update, over elapsed). For example:
//
//	publish  45% |█████████████                 | 12345 events  8123 events/s  ETA 3s
func Render(desc string, done, total, eventsSince, events, progressed uint64, elapsed time.Duration) string {
	var b strings.Builder
	b.WriteString(desc)
	if total > 0 {
		frac := float64(done) / float64(total)
		if frac > 1 {
			frac = 1
		}
		cells := int(frac * barWidth)
		fmt.Fprintf(&b, " %3d%% |%s%s|", int(frac*100), strings.Repeat("█", cells), strings.Repeat(" ", barWidth-cells))
	}
	fmt.Fprintf(&b, " %s events", strconv.FormatUint(events, 10))
	if secs := elapsed.Seconds(); secs > 0 && eventsSince > 0 {
		fmt.Fprintf(&b, "  %s events/s", strconv.FormatFloat(float64(eventsSince)/secs, 'f', 0, 64))
		if total > done && progressed > 0 {
			eta := time.Duration(float64(total-done) / (float64(progressed) / secs) * float64(time.Second))
			fmt.Fprintf(&b, "  ETA %s", eta.Round(time.Second))
		}
	}
	return b.String()
}

// Func returns Update as a func(done, total uint64), the shape of
// projector.RebuildOptions.Progress and the archive options.
func (r *Reporter) Func() func(done, total uint64) {
	if r == nil {
		return nil
	}
	return r.Update
}

// Finish ends the report: the bar is completed (or left where it stopped)
// and one final log line is written: "<description> finished" at info, or,
// when err is not nil, "<description> stopped" at warn (without err, which
// the caller reports).
func (r *Reporter) Finish(err error) {
	if r == nil {
		return
	}
	r.mu.Lock()
	if r.finished {
		r.mu.Unlock()
		return
	}
	r.finished = true
	r.mu.Unlock()
	if r.stop != nil {
		close(r.stop)
		<-r.exited
	}
	if r.o.Mode == Bar {
		r.mu.Lock()
		r.drawLocked(true)
		r.mu.Unlock()
		_, _ = io.WriteString(r.o.Out, "\n")
	}
	if r.o.Mode == Off {
		return
	}
	// A failure is the caller's to report; the line says where it stopped.
	ev, what := r.o.Logger.Info(), " finished"
	if err != nil {
		ev, what = r.o.Logger.Warn(), " stopped"
	}
	r.line(ev).Dur("took", time.Since(r.start).Round(time.Millisecond)).Msg(r.o.Description + what)
}

// line adds the progress fields to ev.
func (r *Reporter) line(ev *zerolog.Event) *zerolog.Event {
	r.mu.Lock()
	done, total, first := r.done, r.total, r.first
	events, firstEvents, firstAt, started := r.eventsLocked(r.done), r.firstEvents, r.firstAt, r.started
	r.mu.Unlock()
	ev = ev.Uint64("done", done).Uint64("total", total).Str("unit", r.o.Unit)
	if r.o.Unit != "events" {
		ev = ev.Uint64("events", events)
	}
	if total > 0 {
		ev = ev.Float64("percent", float64(int(1000*float64(done)/float64(total)))/10)
	}
	if !started {
		return ev
	}
	el := time.Since(firstAt).Seconds()
	if el > 0 && events > firstEvents {
		// The one rate: events per second.
		ev = ev.Float64("rate", float64(int(float64(events-firstEvents)/el*10))/10)
	}
	if el > 0 && done > first && total > done {
		pace := float64(done-first) / el
		ev = ev.Dur("eta", time.Duration(float64(total-done)/pace*float64(time.Second)).Round(time.Second))
	}
	return ev
}

func (r *Reporter) logLoop() {
	defer close(r.exited)
	t := time.NewTicker(r.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			r.line(r.o.Logger.Info()).Msg(r.o.Description)
		}
	}
}
