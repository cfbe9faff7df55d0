package broker

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net/netip"
	"sort"
	"strings"
)

// Stored-record constants (docs/broker.md, "Protocol notes": the stored record).
const (
	magicMessage = 0xDAA320A7
	magicBlank   = 0xCBD43194
	// recordFixedSize is the size of a record without body, topic and properties.
	recordFixedSize = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + 1 + 2
	blankSize       = 8

	// SysFlagCompressed marks a zlib-compressed body.
	SysFlagCompressed = 0x1
	sysFlagBornV6     = 0x10
	sysFlagStoreV6    = 0x20
	// Transaction bits of the system flag.
	sysFlagTxnMask     = 0xC
	sysFlagTxnPrepared = 0x4
	sysFlagTxnCommit   = 0x8
	sysFlagTxnRollback = 0xC
)

// Property keys with a meaning to the broker.
const (
	PropKeys           = "KEYS"
	PropTags           = "TAGS"
	PropUniqKey        = "UNIQ_KEY"
	PropDelay          = "DELAY"
	PropRetryTopic     = "RETRY_TOPIC"
	PropOriginMsgID    = "ORIGIN_MESSAGE_ID"
	PropRealTopic      = "REAL_TOPIC"
	PropRealQueue      = "REAL_QID"
	PropReconsumeTimes = "RECONSUME_TIME"
	// Transactional messages.
	PropTransactionPrepared = "TRAN_MSG"
	PropProducerGroup       = "PGROUP"
	PropCheckTimes          = "TRANSACTION_CHECK_TIMES"
	PropCheckImmunity       = "CHECK_IMMUNITY_TIME_IN_SECONDS"
)

// Message is one record as the engine sees it.
type Message struct {
	// Topic and Queue are set by Pull; Append takes them from its arguments.
	Topic string
	Queue int
	// Key is the KEYS property, Tags the TAGS property.
	Key  string
	Tags string
	// Properties holds the other user properties (never KEYS or TAGS).
	Properties map[string]string
	// Body is the message body. A body stored compressed (SysFlagCompressed) is returned
	// inflated, with the flag cleared; one that does not inflate keeps the flag and its
	// stored bytes, and BodyErr says why (wrapping ErrBadBody). On Append, a body with
	// SysFlagCompressed set is taken as zlib-compressed already and stored as it is.
	Body    []byte
	BodyErr error
	Flag    int32
	SysFlag int32
	// BornTimestamp is set by the producer; StoreTimestamp by the broker (epoch ms).
	BornTimestamp  int64
	StoreTimestamp int64
	// QueueOffset is the logical offset in its queue; PhysicalOffset the commit-log offset.
	QueueOffset    int64
	PhysicalOffset int64
	ReconsumeTimes int32
	BornHost       netip.AddrPort
	StoreHost      netip.AddrPort
}

// inMsg is a message on its way into the commit log, properties already encoded.
type inMsg struct {
	topic     string
	queue     int
	flag      int32
	sysFlag   int32
	bornTS    int64
	bornHost  netip.AddrPort
	reconsume int32
	body      []byte
	props     []byte
	tagsCode  int64
	storeTS   int64 // 0 = now
	// prepared is the PREPAREDTRANSACTIONOFFSET field: on a committed transactional message,
	// the commit-log offset of its half message.
	prepared int64
}

func (m *inMsg) size() int {
	return recordFixedSize + len(m.body) + len(m.topic) + len(m.props)
}

// EncodeProperties renders properties as key 0x01 value 0x02 entries, keys sorted.
func EncodeProperties(p map[string]string) []byte {
	if len(p) == 0 {
		return nil
	}
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b []byte
	for _, k := range keys {
		v := p[k]
		if k == "" || v == "" {
			continue
		}
		b = append(b, k...)
		b = append(b, 1)
		b = append(b, v...)
		b = append(b, 2)
	}
	return b
}

// DecodeProperties parses the key 0x01 value 0x02 encoding; malformed entries are skipped.
func DecodeProperties(b []byte) map[string]string {
	m := make(map[string]string)
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != 2 {
			i++
		}
		ent := b[:i]
		if i < len(b) {
			b = b[i+1:]
		} else {
			b = nil
		}
		j := 0
		for j < len(ent) && ent[j] != 1 {
			j++
		}
		if j == 0 || j >= len(ent)-1 {
			continue
		}
		m[string(ent[:j])] = string(ent[j+1:])
	}
	return m
}

// propValue finds one property without building a map ("" when absent).
func propValue(b []byte, key string) string {
	v, _ := propLookup(b, key)
	return v
}

// TagsCode is Java's String.hashCode of the tag (UTF-16 units), 0 for no tag.
func TagsCode(tag string) int64 {
	if tag == "" {
		return 0
	}
	var h int32
	for _, r := range tag {
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return int64(h)
}

// ValidTopic reports whether name matches [%|a-zA-Z0-9_-]{1,127}.
func ValidTopic(name string) bool {
	if name == "" || len(name) > 127 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '%' || c == '|' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func putHost(b []byte, h netip.AddrPort) {
	a := h.Addr().Unmap()
	var ip4 [4]byte
	if a.Is4() {
		ip4 = a.As4()
	}
	copy(b, ip4[:])
	binary.BigEndian.PutUint32(b[4:], uint32(h.Port()))
}

// encodeRecord writes m as a stored record into dst (len(dst) >= m.size()).
func encodeRecord(dst []byte, m *inMsg, queueOffset, physOffset, storeTS int64, storeHost netip.AddrPort) int {
	n := m.size()
	be := binary.BigEndian
	be.PutUint32(dst[0:], uint32(n))
	be.PutUint32(dst[4:], magicMessage)
	be.PutUint32(dst[8:], crc32.ChecksumIEEE(m.body)&0x7FFFFFFF)
	be.PutUint32(dst[12:], uint32(m.queue))
	be.PutUint32(dst[16:], uint32(m.flag))
	be.PutUint64(dst[20:], uint64(queueOffset))
	be.PutUint64(dst[28:], uint64(physOffset))
	be.PutUint32(dst[36:], uint32(m.sysFlag&^(sysFlagBornV6|sysFlagStoreV6)))
	be.PutUint64(dst[40:], uint64(m.bornTS))
	putHost(dst[48:], m.bornHost)
	be.PutUint64(dst[56:], uint64(storeTS))
	putHost(dst[64:], storeHost)
	be.PutUint32(dst[72:], uint32(m.reconsume))
	be.PutUint64(dst[76:], uint64(m.prepared))
	be.PutUint32(dst[84:], uint32(len(m.body)))
	p := 88
	p += copy(dst[p:], m.body)
	dst[p] = byte(len(m.topic))
	p++
	p += copy(dst[p:], m.topic)
	be.PutUint16(dst[p:], uint16(len(m.props)))
	p += 2
	p += copy(dst[p:], m.props)
	return p
}

// RecordError describes a stored record that fails validation.
type RecordError struct {
	Offset int64 // commit-log offset of the record (or of the buffer start for DecodeRecords)
	Reason string
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("broker: bad record at offset %d: %s", e.Offset, e.Reason)
}

// recordView holds the fields of a validated stored record; slices alias the input.
type recordView struct {
	size        int
	queue       int32
	flag        int32
	queueOffset int64
	physOffset  int64
	sysFlag     int32
	bornTS      int64
	bornHost    netip.AddrPort
	storeTS     int64
	storeHost   netip.AddrPort
	reconsume   int32
	prepared    int64
	body        []byte
	topic       string
	props       []byte
}

func getHost(b []byte) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[:4])), uint16(binary.BigEndian.Uint32(b[4:])))
}

// parseRecord validates one record at the start of b: size, magic, lengths that add up,
// and the body CRC. at is the offset used in errors.
func parseRecord(b []byte, at int64) (recordView, error) {
	var r recordView
	bad := func(s string, a ...any) (recordView, error) {
		return r, &RecordError{Offset: at, Reason: fmt.Sprintf(s, a...)}
	}
	if len(b) < 8 {
		return bad("truncated header (%d bytes)", len(b))
	}
	be := binary.BigEndian
	size := int64(be.Uint32(b))
	magic := be.Uint32(b[4:])
	if magic != magicMessage {
		return bad("magic %08X", magic)
	}
	if size < recordFixedSize || size > int64(len(b)) {
		return bad("size %d outside %d..%d", size, recordFixedSize, len(b))
	}
	b = b[:size]
	r.size = int(size)
	crc := be.Uint32(b[8:])
	r.queue = int32(be.Uint32(b[12:]))
	r.flag = int32(be.Uint32(b[16:]))
	r.queueOffset = int64(be.Uint64(b[20:]))
	r.physOffset = int64(be.Uint64(b[28:]))
	r.sysFlag = int32(be.Uint32(b[36:]))
	if r.sysFlag&(sysFlagBornV6|sysFlagStoreV6) != 0 {
		return bad("IPv6 hosts are not stored by this broker")
	}
	r.bornTS = int64(be.Uint64(b[40:]))
	r.bornHost = getHost(b[48:])
	r.storeTS = int64(be.Uint64(b[56:]))
	r.storeHost = getHost(b[64:])
	r.reconsume = int32(be.Uint32(b[72:]))
	r.prepared = int64(be.Uint64(b[76:]))
	bodyLen := int64(be.Uint32(b[84:]))
	p := int64(88)
	if bodyLen > size-p-3 {
		return bad("body length %d exceeds record", bodyLen)
	}
	r.body = b[p : p+bodyLen]
	p += bodyLen
	tl := int64(b[p])
	p++
	if tl > size-p-2 {
		return bad("topic length %d exceeds record", tl)
	}
	r.topic = string(b[p : p+tl])
	p += tl
	pl := int64(be.Uint16(b[p:]))
	p += 2
	if p+pl != size {
		return bad("fields end at %d, size says %d", p+pl, size)
	}
	r.props = b[p : p+pl]
	if crc32.ChecksumIEEE(r.body)&0x7FFFFFFF != crc {
		return bad("body CRC mismatch")
	}
	if r.queue < 0 || r.queueOffset < 0 || r.physOffset < 0 {
		return bad("negative queue id or offset")
	}
	return r, nil
}

func (r *recordView) message() Message {
	m := Message{
		Topic:          r.topic,
		Queue:          int(r.queue),
		Flag:           r.flag,
		SysFlag:        r.sysFlag,
		BornTimestamp:  r.bornTS,
		StoreTimestamp: r.storeTS,
		QueueOffset:    r.queueOffset,
		PhysicalOffset: r.physOffset,
		ReconsumeTimes: r.reconsume,
		BornHost:       r.bornHost,
		StoreHost:      r.storeHost,
	}
	if r.sysFlag&SysFlagCompressed != 0 {
		body, err := DecompressBody(r.body, MaxBodySize)
		if err != nil {
			m.Body = append([]byte(nil), r.body...)
			m.BodyErr = fmt.Errorf("message at queue offset %d of %s queue %d (commit-log offset %d): %w", r.queueOffset, r.topic, r.queue, r.physOffset, err)
		} else {
			m.Body = body
			m.SysFlag &^= SysFlagCompressed
		}
	} else {
		m.Body = append([]byte(nil), r.body...)
	}
	if len(r.props) > 0 {
		p := DecodeProperties(r.props)
		m.Key = p[PropKeys]
		m.Tags = p[PropTags]
		delete(p, PropKeys)
		delete(p, PropTags)
		if len(p) > 0 {
			m.Properties = p
		}
	}
	return m
}

// DecodeRecords decodes stored records laid end to end (the body of a pull answer);
// compressed bodies are inflated as Message.Body says.
func DecodeRecords(b []byte) ([]Message, error) {
	var out []Message
	at := int64(0)
	for len(b) > 0 {
		r, err := parseRecord(b, at)
		if err != nil {
			return out, err
		}
		out = append(out, r.message())
		b = b[r.size:]
		at += int64(r.size)
	}
	return out, nil
}

// MessageID renders the offsetMsgId: store IPv4, port and physical offset as upper hex.
func MessageID(storeHost netip.AddrPort, phys int64) string {
	var b [16]byte
	putHost(b[:8], storeHost)
	binary.BigEndian.PutUint64(b[8:], uint64(phys))
	const hexd = "0123456789ABCDEF"
	var s strings.Builder
	s.Grow(32)
	for _, c := range b {
		s.WriteByte(hexd[c>>4])
		s.WriteByte(hexd[c&15])
	}
	return s.String()
}
