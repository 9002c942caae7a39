package edgeconf

import (
	"encoding/json"
	"strconv"
	"strings"

	"usher/internal/apierror"
	"usher/internal/fault"
)

// unavailableHTML is the page the edge serves itself, fail closed, when no
// usher answers a gated request from a browser: 503, no-store, reloading
// itself after UnavailableRetry seconds. One line without $, braces,
// double quotes or backslashes, so that it goes into either file as is.
var unavailableHTML = strings.Join([]string{
	"<!doctype html><html lang='en'><head><meta charset='utf-8'>",
	"<meta name='viewport' content='width=device-width, initial-scale=1'>",
	"<meta http-equiv='refresh' content='" + strconv.Itoa(UnavailableRetry) + "'>",
	"<title>High demand</title></head>",
	"<body style='font-family:system-ui,sans-serif;max-width:34rem;margin:4rem auto;padding:0 1rem;line-height:1.5'>",
	"<h1>High demand</h1>",
	"<p>So many people are visiting right now that we cannot let you in yet.",
	" This page tries again by itself every " + strconv.Itoa(UnavailableRetry) + " seconds.</p>",
	"</body></html>",
}, "")

// unavailableJSON is the same answer to a client that asks for JSON, in
// usher's error shape (apierror): code unavailable.
func unavailableJSON() string { return errorJSON(fault.Unavailable, apierror.UnavailableMessage) }

// notFoundJSON is usher's answer to a route it does not serve.
func notFoundJSON() string { return errorJSON(fault.NotFound, apierror.ErrNotFound.Error()) }

// errorJSON is usher's error body with code and message.
func errorJSON(code, message string) string {
	var b apierror.Body
	b.Error.Code, b.Error.Message = code, message
	out, err := json.Marshal(b)
	if err != nil {
		panic(err) // a fixed value
	}
	return string(out)
}

// quote writes s as a double-quoted string of nginx (which reads \\ and
// \" as escapes) or Caddy (which reads only \").
func quote(s string, nginx bool) string {
	if nginx {
		s = strings.ReplaceAll(s, `\`, `\\`)
	}
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}
