package testenv

import (
	"fmt"
	"net/http"
)

// EchoUpgrade answers an upgrade request as an origin that switches to any
// protocol it is asked for would: 101 with the requested Upgrade, then one
// line read and written back as "echo:<line>". It lets an edge test see
// whether a tunnel reached the origin.
func EchoUpgrade(w http.ResponseWriter, r *http.Request) {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: %s\r\nConnection: Upgrade\r\n\r\n", r.Header.Get("Upgrade"))
	brw.Flush()
	line, _ := brw.ReadString('\n')
	fmt.Fprintf(conn, "echo:%s", line)
}
