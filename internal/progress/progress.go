// Package progress reports the progress of long operations (rebuild,
// export, import, replay): a progress bar (github.com/schollz/progressbar/v3:
// count, events/s, percent, ETA) when the output is a terminal, and
// otherwise one zerolog line every few seconds (done, total, percent, rate,
// ETA), so that logs of a job or a pipe are not flooded with carriage
// returns.
//
// Contract: New starts at most one goroutine (the periodic logger, in log
// mode), which Finish stops and waits for; Finish must be called exactly
// once, from the goroutine that owns the Reporter or any other. Update and
// Finish are safe for concurrent use. A nil *Reporter is valid and reports
// nothing, so callers may pass one around unconditionally.
package progress

import (
	"io"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// DefaultInterval is how often the log mode writes a line.
const DefaultInterval = 5 * time.Second

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
	// Unit names what is counted (default "events").
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
	bar   *progressbar.ProgressBar
	start time.Time

	mu           sync.Mutex
	done, total  uint64
	first        uint64 // done at the first update (a resumed operation)
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
	case Bar:
		r.bar = progressbar.NewOptions64(int64(total),
			progressbar.OptionSetDescription(o.Description),
			progressbar.OptionSetWriter(o.Out),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString(o.Unit),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionOnCompletion(func() { _, _ = io.WriteString(o.Out, "\n") }),
		)
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
		r.started, r.first = true, done
	}
	if total > 0 && total != r.total {
		r.total = total
		if r.bar != nil {
			r.bar.ChangeMax64(int64(total))
		}
	}
	r.done = done
	if r.bar != nil {
		_ = r.bar.Set64(int64(done))
	}
}

// Func returns Update as a func(done, total uint64), the shape of
// projections.RebuildOptions.Progress and the archive options.
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
	if r.bar != nil {
		if err == nil && r.done >= r.total {
			_ = r.bar.Finish()
		} else {
			_ = r.bar.Exit()
			_, _ = io.WriteString(r.o.Out, "\n")
		}
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
	r.mu.Unlock()
	el := time.Since(r.start).Seconds()
	ev = ev.Uint64("done", done).Uint64("total", total).Str("unit", r.o.Unit)
	if total > 0 {
		ev = ev.Float64("percent", float64(int(1000*float64(done)/float64(total)))/10)
	}
	if el > 0 && done > first {
		rate := float64(done-first) / el
		ev = ev.Float64("rate", float64(int(rate*10))/10)
		if total > done {
			ev = ev.Dur("eta", time.Duration(float64(total-done)/rate*float64(time.Second)).Round(time.Second))
		}
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
