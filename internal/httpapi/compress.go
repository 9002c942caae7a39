package httpapi

import (
	"net/http"

	"github.com/klauspost/compress/gzhttp"
)

// compressMin is the smallest JSON body compressed: below it, gzip's
// header and the CPU cost more than the bytes saved (a status poll).
const compressMin = 1 << 10

// compress gzips JSON answers of compressMin bytes or more for clients that
// accept gzip, and adds Vary: Accept-Encoding to every answer. Other types
// pass as they are: event streams (text/event-stream) keep flushing each
// event, and a handler that encodes its own body (Content-Encoding set: the
// seat layout, promhttp's metrics) is not encoded twice.
func compress(next http.Handler) http.Handler {
	wrap, err := gzhttp.NewWrapper(
		gzhttp.MinSize(compressMin),
		gzhttp.ContentTypes([]string{"application/json"}),
		gzhttp.EnableZstd(false),
	)
	if err != nil {
		panic(err) // the options above are valid
	}
	return wrap(next)
}
