package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"
)

// logFlags are the logging settings of the subcommands that serve (serve,
// proxy, origin), shared under USHER_LOG_*.
type logFlags struct {
	format, level *string
	access        *bool
}

func addLogFlags(f *flags) logFlags {
	return logFlags{
		format: f.string("log-format", "text", "log format: text or json"),
		level:  f.string("log-level", "info", "least severe level logged: debug, info, warn or error (debug adds a line per request and the embedded NATS server's log)"),
		access: f.bool("access-log", false, "log one line per request at info, whatever --log-level"),
	}
}

// check reports bad values into f's errors, before anything is opened.
func (l logFlags) check(f *flags) {
	if _, err := l.parseLevel(); err != nil {
		f.errs = append(f.errs, fmt.Sprintf("--log-level/%s: %v", f.envName("log-level"), err))
	}
	if *l.format != "text" && *l.format != "json" {
		f.errs = append(f.errs, fmt.Sprintf("--log-format/%s=%q: want text or json", f.envName("log-format"), *l.format))
	}
}

func (l logFlags) parseLevel() (slog.Level, error) {
	var lv slog.Level
	switch strings.ToLower(*l.level) {
	case "debug", "info", "warn", "error":
		return lv, lv.UnmarshalText([]byte(*l.level))
	}
	return lv, fmt.Errorf("%q: want debug, info, warn or error", *l.level)
}

// logger builds the process's logger on w; call check first.
func (l logFlags) logger(w io.Writer) *slog.Logger {
	lv, _ := l.parseLevel()
	o := &slog.HandlerOptions{Level: lv}
	if *l.format == "json" {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}

// accessLog wraps h to log one line per request when --access-log is set
// (at info) or the logger is at debug (at debug); otherwise it returns h
// untouched, so that requests pay nothing for it.
func (l logFlags) accessLog(log *slog.Logger, h http.Handler) http.Handler {
	level := slog.LevelDebug
	if *l.access {
		level = slog.LevelInfo
	}
	if !log.Enabled(context.Background(), level) {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		log.LogAttrs(r.Context(), level, "request",
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", rec.status), slog.Int64("bytes", rec.bytes),
			slog.Duration("took", time.Since(start)), slog.String("remote", r.RemoteAddr))
	})
}

// recorder notes a response's status and size. Unwrap lets
// http.ResponseController reach the Flusher and Hijacker underneath
// (server-sent events, websockets through the proxy).
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
	wrote  bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Flush() { http.NewResponseController(r.ResponseWriter).Flush() }

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// baseURL is a URL a person can click for a listener: an unspecified host
// ([::] or 0.0.0.0) becomes 127.0.0.1.
func baseURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// stopped logs the end of a server subcommand and passes its error on.
func stopped(log *slog.Logger, err error) error {
	if err != nil {
		log.Error("stopped", "err", err)
	} else {
		log.Info("stopped")
	}
	return err
}
