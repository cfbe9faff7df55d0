// Package remoting is the RocketMQ remoting wire format: length-prefixed frames whose header
// is JSON (type 0) or the binary ROCKETMQ encoding (type 1), followed by a body.
//
// ReadFrame reads one frame and never allocates more than the frame-size limit; Decode
// parses a frame's payload and returns a *FrameError naming what is wrong for any
// malformed input (it never panics). Encode appends a command in the serialisation type
// it carries (SerializeType), so a reply can use the type of its request. extFields values
// are always strings, as the Go client requires.
package remoting
