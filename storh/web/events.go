package web

import (
	"net/http"
	"time"
)

// eventStream is the body of a Server-Sent Events answer: a tail or a
// changes stream. Each write has tailWriteTimeout to reach the client.
type eventStream struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// startEvents answers 200 with an event stream and sends its first
// comment, which tells the client the stream is live: from then on,
// nothing is missed. It reports whether that reached the client.
func startEvents(w http.ResponseWriter, comment string) (*eventStream, bool) {
	rc := http.NewResponseController(w)
	// The server's own read deadline (http.Server.ReadTimeout) would
	// cancel the request's context mid-stream; the request is read, and
	// the stream has its own limit. Not every ResponseWriter supports it.
	_ = rc.SetReadDeadline(time.Time{})
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	// Proxies such as nginx buffer responses unless told not to.
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &eventStream{w: w, rc: rc}
	return s, s.send([]byte(": " + comment + "\n\n"))
}

// headEvents answers a HEAD of a stream: the mux sends HEAD to GET
// handlers, and a stream without a body would otherwise run, unseen,
// until its limit.
func headEvents(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
}

// write writes b, and reports whether it reached the connection.
func (s *eventStream) write(b []byte) bool {
	_ = s.rc.SetWriteDeadline(time.Now().Add(tailWriteTimeout))
	_, err := s.w.Write(b)
	return err == nil
}

// send writes b and flushes it to the client.
func (s *eventStream) send(b []byte) bool { return s.write(b) && s.rc.Flush() == nil }

// appendEvent appends to buf an event of id whose data is one JSON
// value: JSON holds no newline (it escapes them in strings), so it is one
// data line, and the encoders here end it with one, which ends the line.
func appendEvent[ID string | []byte](buf []byte, id ID, json []byte) []byte {
	buf = append(buf, "id: "...)
	buf = append(buf, id...)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, json...)
	return append(buf, '\n')
}
