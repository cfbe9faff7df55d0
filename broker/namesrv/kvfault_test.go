package namesrv_test

import (
	"syscall"
	"testing"

	"rsql/broker/namesrv"
	"rsql/internal/durable/durabletest"
)

// A failed fsync of kvConfig.json fails the put that needed it with a system error; the
// values stored before it are there after a restart with the real file system.
func TestKVConfigSyncFails(t *testing.T) {
	dir := t.TempDir()
	fs := &durabletest.FS{}
	s := startNamesrv(t, namesrv.WithFS(namesrv.Config{Dir: dir}, fs))
	if r := call(t, s.Addr(), 100, map[string]string{"namespace": "ns", "key": "a", "value": "1"}, nil); r.Code != 0 {
		t.Fatalf("put a: %d %s", r.Code, r.Remark)
	}
	fs.Arm(durabletest.Sync, "kvConfig.json", 1, syscall.EIO)
	r := call(t, s.Addr(), 100, map[string]string{"namespace": "ns", "key": "b", "value": "2"}, nil)
	if r.Code == 0 {
		t.Fatalf("a put whose fsync failed succeeded")
	}
	if fs.Fired() != 1 {
		t.Fatalf("the fault fired %d times", fs.Fired())
	}
	// What was not stored is not served either.
	if miss := call(t, s.Addr(), 101, map[string]string{"namespace": "ns", "key": "b"}, nil); miss.Code != 22 {
		t.Fatalf("b after its failed put: code %d %q", miss.Code, miss.Ext("value"))
	}
	s.Close()
	s2 := namesrv.New(namesrv.Config{Dir: dir})
	if err := s2.Serve("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	get := call(t, s2.Addr(), 101, map[string]string{"namespace": "ns", "key": "a"}, nil)
	if get.Code != 0 || get.Ext("value") != "1" {
		t.Fatalf("a after restart: %d %q", get.Code, get.Ext("value"))
	}
	if miss := call(t, s2.Addr(), 101, map[string]string{"namespace": "ns", "key": "b"}, nil); miss.Code != 22 {
		t.Fatalf("b after restart: code %d %q", miss.Code, miss.Ext("value"))
	}
}
