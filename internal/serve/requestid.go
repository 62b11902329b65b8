package serve

import (
	"encoding/hex"
	"math/rand/v2"
	"net/http"
)

// requestID gives the request an X-Request-Id the app sees and the access
// log records: the client's (or a proxy's), cleaned as Rails cleans it,
// else a new random one in a UUID's form. Rails' RequestId middleware then
// tags its log lines with the same id. The response gets none from ruvoy:
// Rails adds it, and a bare Rack app decides.
func requestID(r *http.Request) {
	if v := r.Header["X-Request-Id"]; len(v) > 0 {
		if clean := cleanRequestID(v[0]); clean != "" {
			if len(v) > 1 || clean != v[0] {
				r.Header["X-Request-Id"] = []string{clean}
			}
			return
		}
	}
	r.Header["X-Request-Id"] = []string{newRequestID()}
}

// cleanRequestID keeps what Rails keeps of an id: word characters, "-"
// and "@", 255 at most.
func cleanRequestID(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if !idChar(s[i]) {
			clean = false
			break
		}
	}
	if clean && len(s) <= 255 {
		return s
	}
	b := make([]byte, 0, min(len(s), 255))
	for i := 0; i < len(s) && len(b) < 255; i++ {
		if idChar(s[i]) {
			b = append(b, s[i])
		}
	}
	return string(b)
}

func idChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '@'
}

// newRequestID is 122 random bits as a version 4 UUID. Uniqueness is all
// an id needs: math/rand/v2's generator (ChaCha8, seeded by the OS) is fast
// and shared safely by every goroutine.
func newRequestID() string {
	var u [16]byte
	hi, lo := rand.Uint64(), rand.Uint64()
	for i := 0; i < 8; i++ {
		u[i], u[8+i] = byte(hi>>(56-8*i)), byte(lo>>(56-8*i))
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:36], u[10:16])
	return string(s[:])
}
