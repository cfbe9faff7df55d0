package remoting

import (
	"encoding/binary"
	"errors"
	"fmt"
	json "github.com/goccy/go-json"
	"io"
	"strconv"
)

// Serialisation types of the header.
const (
	SerializeJSON     = 0
	SerializeRocketMQ = 1
)

// Flag bits.
const (
	FlagResponse = 1
	FlagOneway   = 2
)

// Command is one request or response.
type Command struct {
	Code          int16
	Language      string
	Version       int16
	Opaque        int32
	Flag          int32
	Remark        string
	ExtFields     map[string]string
	Body          []byte
	SerializeType byte
}

// IsResponse reports whether the response bit is set.
func (c *Command) IsResponse() bool { return c.Flag&FlagResponse != 0 }

// Reply builds a response to c with the given code, echoing its opaque and serialisation.
func (c *Command) Reply(code int16, remark string) *Command {
	return &Command{Code: code, Language: "GO", Version: 479, Opaque: c.Opaque, Flag: FlagResponse,
		Remark: remark, SerializeType: c.SerializeType}
}

// Ext returns an extField, "" when absent.
func (c *Command) Ext(k string) string { return c.ExtFields[k] }

// ExtInt parses an integer extField.
func (c *Command) ExtInt(k string) (int64, error) {
	v, ok := c.ExtFields[k]
	if !ok {
		return 0, fmt.Errorf("missing header field %q", k)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("header field %q=%q is not an integer", k, v)
	}
	return n, nil
}

// ExtIntOr is ExtInt for an optional field: a missing (or empty) field reads as def, a
// field that is not an integer is an error naming it.
func (c *Command) ExtIntOr(k string, def int64) (int64, error) {
	if c.ExtFields[k] == "" {
		return def, nil
	}
	return c.ExtInt(k)
}

// FrameError describes a malformed frame.
type FrameError struct {
	Reason string
}

func (e *FrameError) Error() string { return "remoting: bad frame: " + e.Reason }

func bad(f string, a ...any) error { return &FrameError{Reason: fmt.Sprintf(f, a...)} }

// ErrFrameTooLarge is wrapped by ReadFrame when the length prefix exceeds the limit.
var ErrFrameTooLarge = errors.New("remoting: frame too large")

// ReadFrame reads one frame's payload (everything after the 4-byte length).
func ReadFrame(r io.Reader, maxSize int, buf []byte) ([]byte, error) {
	var l [4]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(l[:])
	if n < 4 {
		return nil, bad("length %d is below the 4-byte header-length field", n)
	}
	if int64(n) > int64(maxSize) {
		return nil, fmt.Errorf("%w: %d bytes (limit %d)", ErrFrameTooLarge, n, maxSize)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

type jsonHeader struct {
	Code      int16             `json:"code"`
	Language  string            `json:"language"`
	Version   int16             `json:"version"`
	Opaque    int32             `json:"opaque"`
	Flag      int32             `json:"flag"`
	Remark    string            `json:"remark,omitempty"`
	ExtFields map[string]string `json:"extFields,omitempty"`
}

// lenientHeader accepts extFields values of any JSON type (other clients send numbers).
type lenientHeader struct {
	Code      int16                      `json:"code"`
	Language  string                     `json:"language"`
	Version   int16                      `json:"version"`
	Opaque    int32                      `json:"opaque"`
	Flag      int32                      `json:"flag"`
	Remark    *string                    `json:"remark"`
	ExtFields map[string]json.RawMessage `json:"extFields"`
}

// Decode parses a frame payload (as returned by ReadFrame). Body aliases p.
func Decode(p []byte) (*Command, error) {
	if len(p) < 4 {
		return nil, bad("payload of %d bytes has no header length", len(p))
	}
	ht := p[0]
	hl := int(binary.BigEndian.Uint32(p) & 0xFFFFFF)
	if hl > len(p)-4 {
		return nil, bad("header length %d exceeds payload of %d bytes", hl, len(p)-4)
	}
	h := p[4 : 4+hl]
	c := &Command{Body: p[4+hl:], SerializeType: ht}
	if len(c.Body) == 0 {
		c.Body = nil
	}
	switch ht {
	case SerializeJSON:
		var jh lenientHeader
		if err := json.Unmarshal(h, &jh); err != nil {
			return nil, bad("JSON header: %v", err)
		}
		c.Code, c.Language, c.Version, c.Opaque, c.Flag = jh.Code, jh.Language, jh.Version, jh.Opaque, jh.Flag
		if jh.Remark != nil {
			c.Remark = *jh.Remark
		}
		if len(jh.ExtFields) > 0 {
			c.ExtFields = make(map[string]string, len(jh.ExtFields))
			for k, raw := range jh.ExtFields {
				var s string
				if err := json.Unmarshal(raw, &s); err == nil {
					c.ExtFields[k] = s
				} else if string(raw) != "null" {
					c.ExtFields[k] = string(raw)
				}
			}
		}
	case SerializeRocketMQ:
		if err := decodeBinaryHeader(h, c); err != nil {
			return nil, err
		}
	default:
		return nil, bad("unknown serialisation type %d", ht)
	}
	return c, nil
}

var languages = []string{"JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS", "RUST"}

func decodeBinaryHeader(h []byte, c *Command) error {
	be := binary.BigEndian
	if len(h) < 2+1+2+4+4+4 {
		return bad("binary header of %d bytes is too short", len(h))
	}
	c.Code = int16(be.Uint16(h))
	if l := int(h[2]); l < len(languages) {
		c.Language = languages[l]
	} else {
		c.Language = "OTHER"
	}
	c.Version = int16(be.Uint16(h[3:]))
	c.Opaque = int32(be.Uint32(h[5:]))
	c.Flag = int32(be.Uint32(h[9:]))
	p := 13
	rl := int(int32(be.Uint32(h[p:])))
	p += 4
	if rl < 0 || rl > len(h)-p {
		return bad("binary header remark length %d exceeds header", rl)
	}
	c.Remark = string(h[p : p+rl])
	p += rl
	if len(h)-p < 4 {
		return bad("binary header has no extFields length")
	}
	el := int(int32(be.Uint32(h[p:])))
	p += 4
	if el < 0 || el > len(h)-p {
		return bad("binary header extFields length %d exceeds header", el)
	}
	e := h[p : p+el]
	if len(e) > 0 {
		c.ExtFields = map[string]string{}
	}
	for len(e) > 0 {
		if len(e) < 2 {
			return bad("truncated extFields key length")
		}
		kl := int(be.Uint16(e))
		e = e[2:]
		if kl > len(e) {
			return bad("extFields key length %d exceeds header", kl)
		}
		k := string(e[:kl])
		e = e[kl:]
		if len(e) < 4 {
			return bad("truncated extFields value length")
		}
		vl := int(int32(be.Uint32(e)))
		e = e[4:]
		if vl < 0 || vl > len(e) {
			return bad("extFields value length %d exceeds header", vl)
		}
		c.ExtFields[k] = string(e[:vl])
		e = e[vl:]
	}
	return nil
}

// Encode appends the whole frame (length prefix included) to dst.
func Encode(dst []byte, c *Command) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	hs := len(dst)
	switch c.SerializeType {
	case SerializeRocketMQ:
		dst = appendBinaryHeader(dst, c)
	default:
		h, err := json.Marshal(jsonHeader{Code: c.Code, Language: c.Language, Version: c.Version,
			Opaque: c.Opaque, Flag: c.Flag, Remark: c.Remark, ExtFields: c.ExtFields})
		if err != nil {
			return dst[:start], err
		}
		dst = append(dst, h...)
	}
	hl := len(dst) - hs
	if hl > 0xFFFFFF {
		return dst[:start], bad("header of %d bytes exceeds 16 MiB", hl)
	}
	dst = append(dst, c.Body...)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	binary.BigEndian.PutUint32(dst[start+4:], uint32(c.SerializeType)<<24|uint32(hl))
	return dst, nil
}

func appendBinaryHeader(dst []byte, c *Command) []byte {
	be := binary.BigEndian
	lang := byte(9)
	for i, l := range languages {
		if l == c.Language {
			lang = byte(i)
		}
	}
	dst = be.AppendUint16(dst, uint16(c.Code))
	dst = append(dst, lang)
	dst = be.AppendUint16(dst, uint16(c.Version))
	dst = be.AppendUint32(dst, uint32(c.Opaque))
	dst = be.AppendUint32(dst, uint32(c.Flag))
	dst = be.AppendUint32(dst, uint32(len(c.Remark)))
	dst = append(dst, c.Remark...)
	lp := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	for k, v := range c.ExtFields {
		dst = be.AppendUint16(dst, uint16(len(k)))
		dst = append(dst, k...)
		dst = be.AppendUint32(dst, uint32(len(v)))
		dst = append(dst, v...)
	}
	be.PutUint32(dst[lp:], uint32(len(dst)-lp-4))
	return dst
}

// RoundTrip writes req to c and reads frames until the response with req's opaque arrives
// (frames in between, such as server notifications, are skipped). It is the synchronous
// client side of one request; the caller sets c's deadline.
func RoundTrip(c io.ReadWriter, req *Command, maxFrame int) (*Command, error) {
	f, err := Encode(nil, req)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write(f); err != nil {
		return nil, err
	}
	for {
		p, err := ReadFrame(c, maxFrame, nil)
		if err != nil {
			return nil, err
		}
		resp, err := Decode(p)
		if err != nil {
			return nil, err
		}
		if resp.IsResponse() && resp.Opaque == req.Opaque {
			return resp, nil
		}
	}
}
