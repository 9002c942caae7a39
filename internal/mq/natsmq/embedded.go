package natsmq

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// StartEmbedded starts a single NATS server with JetStream in this process,
// storing its streams under dir (created if missing; reuse it to keep the
// backlog and the states across restarts). It listens on no port: connect
// with ConnectEmbedded. log receives the server's notices, warnings and
// errors (nil: none). Stop it with Shutdown and then WaitForShutdown.
//
// The embedded server serves one usher process; several instances that must
// share reservations need an external server (or cluster).
func StartEmbedded(dir string, log *slog.Logger) (*server.Server, error) {
	if dir == "" {
		return nil, errors.New("natsmq: embedded: empty data directory")
	}
	s, err := server.NewServer(&server.Options{
		ServerName: "usher-embedded",
		JetStream:  true,
		StoreDir:   dir,
		DontListen: true,
		// An accepted reservation must survive a crash of the host, as a
		// confirmed one does in SQLite (synchronous=FULL): fsync each write.
		SyncAlways: true,
		NoSigs:     true,
		NoLog:      log == nil,
	})
	if err != nil {
		return nil, fmt.Errorf("natsmq: embedded: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sl := &serverLogger{log: log.With("component", "nats-server")}
	s.SetLoggerV2(sl, false, false, false)
	// Start returns once the server runs in its goroutines, or at once
	// after a fatal error, such as a JetStream store it cannot write.
	s.Start()
	if msg := sl.fatal(); msg != "" {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, fmt.Errorf("natsmq: embedded: %s", msg)
	}
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, errors.New("natsmq: embedded: server not ready after 10s")
	}
	if !s.JetStreamEnabled() {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, fmt.Errorf("natsmq: embedded: JetStream did not start on %s", dir)
	}
	return s, nil
}

// ConnectEmbedded opens an in-process connection to s. Options such as
// nats.Name may be added; the in-process dialer is always used.
func ConnectEmbedded(s *server.Server, opts ...nats.Option) (*nats.Conn, error) {
	nc, err := nats.Connect("", append(opts, nats.InProcessServer(s))...)
	if err != nil {
		return nil, fmt.Errorf("natsmq: connect embedded: %w", err)
	}
	return nc, nil
}

// serverLogger sends the server's log lines to slog. Its notices (the
// start-up banner: version, JetStream limits, store directory) go out at
// debug, its warnings and errors as such; its debug and trace lines are
// dropped (the server is started without them anyway). It keeps the first
// fatal error, after which the server does not start.
type serverLogger struct {
	log *slog.Logger

	mu         sync.Mutex
	firstFatal string
}

func (l *serverLogger) Noticef(format string, v ...any) { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Warnf(format string, v ...any)   { l.log.Warn(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Errorf(format string, v ...any)  { l.log.Error(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Debugf(string, ...any)           {}
func (l *serverLogger) Tracef(string, ...any)           {}

func (l *serverLogger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.log.Error(msg)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.firstFatal == "" {
		l.firstFatal = msg
	}
}

// fatal is the first fatal error the server logged, or "".
func (l *serverLogger) fatal() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.firstFatal
}
