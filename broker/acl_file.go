package broker

import (
	"crypto/hmac"
	"crypto/sha1"
	"fmt"
	"hash"
	"strings"
	"sync"

	yaml "go.yaml.in/yaml/v3"
)

// The ACL file is RocketMQ's plain_acl.yml (docs/security.md, "Broker access control"):
//
//	globalWhiteRemoteAddresses: [10.10.103.*]      # served without any check
//	accounts:
//	  - accessKey: RocketMQ                        # 7 characters or more
//	    secretKey: 12345678                        # 7 characters or more
//	    whiteRemoteAddress: 192.168.0.*            # this account's requests from there: no check
//	    admin: false                               # true: every request, admin codes included
//	    defaultTopicPerm: DENY                     # PUB, SUB, PUB|SUB or DENY (absent: DENY)
//	    defaultGroupPerm: SUB
//	    topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
//	    groupPerms: [groupA=DENY, groupB=PUB|SUB, groupC=SUB]
//
// parseACL turns it into aclRules; it refuses what RocketMQ would refuse or silently
// misread (an unknown key, a permission that is not one of the four, a duplicate access
// key), naming the line.

// perm is a set of RocketMQ ACL permission bits (the values of RocketMQ's Permission).
type perm uint8

const (
	permDeny perm = 1
	permAny  perm = 2
	permPub  perm = 4
	permSub  perm = 8
)

// allows reports whether an owner with p may do what needs: DENY refuses everything, ANY
// is either PUB or SUB, otherwise one needed bit must be owned.
func (p perm) allows(needs perm) bool {
	if p&permDeny != 0 {
		return false
	}
	if needs&permAny != 0 {
		return p&(permPub|permSub) != 0
	}
	return p&needs != 0
}

func (p perm) String() string {
	switch {
	case p&permDeny != 0:
		return "DENY"
	case p&(permPub|permSub) == permPub|permSub:
		return "PUB|SUB"
	case p&permPub != 0:
		return "PUB"
	case p&permSub != 0:
		return "SUB"
	}
	return "ANY"
}

// parsePerm reads one of RocketMQ's permission words.
func parsePerm(s string) (perm, bool) {
	switch strings.TrimSpace(s) {
	case "PUB":
		return permPub, true
	case "SUB":
		return permSub, true
	case "PUB|SUB", "SUB|PUB":
		return permPub | permSub, true
	case "DENY":
		return permDeny, true
	}
	return 0, false
}

// aclMinKeyLen: RocketMQ refuses access and secret keys of 6 characters or fewer.
const aclMinKeyLen = 7

// aclAccount is one account of the file, compiled.
type aclAccount struct {
	accessKey string
	white     *addrPattern // nil: no white-listed address
	admin     bool
	defTopic  perm
	defGroup  perm
	topics    map[string]perm
	groups    map[string]perm
	// macs holds *aclMAC keyed with the secret key, reused across requests (hmac.New costs
	// two hash blocks and allocations).
	macs sync.Pool
}

// aclMAC is one signature computation's state.
type aclMAC struct {
	mac     hash.Hash
	content []byte
	sum     [sha1.Size]byte
	b64     [28]byte // base64 of a SHA-1 sum
}

func newAccount(accessKey, secretKey string) *aclAccount {
	a := &aclAccount{accessKey: accessKey, topics: map[string]perm{}, groups: map[string]perm{}}
	key := []byte(secretKey)
	a.macs.New = func() any { return &aclMAC{mac: hmac.New(sha1.New, key)} }
	return a
}

// aclRules are one version of the ACL file, immutable once parsed.
type aclRules struct {
	global   []*addrPattern
	accounts map[string]*aclAccount
}

// yamlPos names a node's place for error messages.
func yamlPos(n *yaml.Node) string { return fmt.Sprintf("line %d", n.Line) }

// mappingPairs returns a mapping node's key/value pairs, refusing keys not in known.
func mappingPairs(n *yaml.Node, what string, known ...string) ([][2]*yaml.Node, error) {
	if n.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: %s must be a mapping", yamlPos(n), what)
	}
	var out [][2]*yaml.Node
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("%s: %s has a key that is not a name", yamlPos(k), what)
		}
		ok := false
		for _, name := range known {
			ok = ok || k.Value == name
		}
		if !ok {
			return nil, fmt.Errorf("%s: %s has unknown key %q (known: %s)", yamlPos(k), what, k.Value, strings.Join(known, ", "))
		}
		if seen[k.Value] {
			return nil, fmt.Errorf("%s: %s has key %q twice", yamlPos(k), what, k.Value)
		}
		seen[k.Value] = true
		out = append(out, [2]*yaml.Node{k, v})
	}
	return out, nil
}

// scalar reads a scalar (or an empty value) as text: `secretKey: 12345678` is a string.
func scalar(k, v *yaml.Node) (string, error) {
	switch {
	case v.Kind == yaml.ScalarNode && v.Tag == "!!null":
		return "", nil
	case v.Kind == yaml.ScalarNode:
		return v.Value, nil
	}
	return "", fmt.Errorf("%s: %s must be a single value", yamlPos(v), k.Value)
}

// stringList reads a sequence of scalars (an empty value is an empty list).
func stringList(k, v *yaml.Node) ([]string, []*yaml.Node, error) {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return nil, nil, nil
	}
	if v.Kind != yaml.SequenceNode {
		return nil, nil, fmt.Errorf("%s: %s must be a list", yamlPos(v), k.Value)
	}
	var out []string
	for _, item := range v.Content {
		if item.Kind != yaml.ScalarNode {
			return nil, nil, fmt.Errorf("%s: every item of %s must be a single value", yamlPos(item), k.Value)
		}
		out = append(out, item.Value)
	}
	return out, v.Content, nil
}

// parseACL parses the ACL file's bytes. Errors name the line and the key.
func parseACL(data []byte) (*aclRules, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, fmt.Errorf("the file is empty: it must list accounts (or globalWhiteRemoteAddresses)")
	}
	root := doc.Content[0]
	pairs, err := mappingPairs(root, "the file", "globalWhiteRemoteAddresses", "accounts", "dataVersion")
	if err != nil {
		return nil, err
	}
	r := &aclRules{accounts: map[string]*aclAccount{}}
	for _, kv := range pairs {
		k, v := kv[0], kv[1]
		switch k.Value {
		case "globalWhiteRemoteAddresses":
			addrs, nodes, err := stringList(k, v)
			if err != nil {
				return nil, err
			}
			for i, s := range addrs {
				p, err := parseAddrPattern(s)
				if err != nil {
					return nil, fmt.Errorf("%s: globalWhiteRemoteAddresses: %w", yamlPos(nodes[i]), err)
				}
				if p != nil {
					r.global = append(r.global, p)
				}
			}
		case "accounts":
			if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
				continue
			}
			if v.Kind != yaml.SequenceNode {
				return nil, fmt.Errorf("%s: accounts must be a list", yamlPos(v))
			}
			for i, an := range v.Content {
				a, err := parseAccount(an)
				if err != nil {
					return nil, fmt.Errorf("accounts[%d]: %w", i, err)
				}
				if _, dup := r.accounts[a.accessKey]; dup {
					return nil, fmt.Errorf("accounts[%d] (%s): access key %q appears twice", i, yamlPos(an), a.accessKey)
				}
				r.accounts[a.accessKey] = a
			}
		case "dataVersion":
			// Written by RocketMQ's admin commands; it carries nothing a check needs.
		}
	}
	if len(r.accounts) == 0 && len(r.global) == 0 {
		return nil, fmt.Errorf("the file lists no accounts and no globalWhiteRemoteAddresses: every request would be refused")
	}
	return r, nil
}

// parseAccount parses one item of accounts.
func parseAccount(n *yaml.Node) (*aclAccount, error) {
	pairs, err := mappingPairs(n, "an account", "accessKey", "secretKey", "whiteRemoteAddress", "admin",
		"defaultTopicPerm", "defaultGroupPerm", "topicPerms", "groupPerms")
	if err != nil {
		return nil, err
	}
	var ak, sk string
	var akNode *yaml.Node
	for _, kv := range pairs {
		switch kv[0].Value {
		case "accessKey":
			akNode = kv[1]
			if ak, err = scalar(kv[0], kv[1]); err != nil {
				return nil, err
			}
		case "secretKey":
			if sk, err = scalar(kv[0], kv[1]); err != nil {
				return nil, err
			}
		}
	}
	if len(ak) < aclMinKeyLen {
		pos := yamlPos(n)
		if akNode != nil {
			pos = yamlPos(akNode)
		}
		return nil, fmt.Errorf("%s: accessKey %q must be at least %d characters", pos, ak, aclMinKeyLen)
	}
	if len(sk) < aclMinKeyLen {
		// The secret itself is never printed.
		return nil, fmt.Errorf("%s: the secretKey of %q must be at least %d characters", yamlPos(n), ak, aclMinKeyLen)
	}
	a := newAccount(ak, sk)
	a.defTopic, a.defGroup = permDeny, permDeny // RocketMQ's default when the key is absent
	for _, kv := range pairs {
		k, v := kv[0], kv[1]
		where := func(err error) error { return fmt.Errorf("account %q: %w", ak, err) }
		switch k.Value {
		case "whiteRemoteAddress":
			s, err := scalar(k, v)
			if err != nil {
				return nil, where(err)
			}
			if a.white, err = parseAddrPattern(s); err != nil {
				return nil, where(fmt.Errorf("%s: whiteRemoteAddress: %w", yamlPos(v), err))
			}
		case "admin":
			s, err := scalar(k, v)
			if err != nil {
				return nil, where(err)
			}
			switch strings.ToLower(s) {
			case "true", "yes", "on": // YAML 1.1 booleans, as RocketMQ's SnakeYAML reads them
				a.admin = true
			case "false", "no", "off", "":
			default:
				return nil, where(fmt.Errorf("%s: admin must be true or false, not %q", yamlPos(v), s))
			}
		case "defaultTopicPerm", "defaultGroupPerm":
			s, err := scalar(k, v)
			if err != nil {
				return nil, where(err)
			}
			p := permDeny
			if s != "" {
				var ok bool
				if p, ok = parsePerm(s); !ok {
					return nil, where(fmt.Errorf("%s: %s %q is not PUB, SUB, PUB|SUB or DENY", yamlPos(v), k.Value, s))
				}
			}
			if k.Value == "defaultTopicPerm" {
				a.defTopic = p
			} else {
				a.defGroup = p
			}
		case "topicPerms", "groupPerms":
			items, nodes, err := stringList(k, v)
			if err != nil {
				return nil, where(err)
			}
			dst := a.topics
			if k.Value == "groupPerms" {
				dst = a.groups
			}
			for i, item := range items {
				name, ps, ok := strings.Cut(item, "=")
				name = strings.TrimSpace(name)
				if !ok || name == "" || strings.Contains(ps, "=") {
					return nil, where(fmt.Errorf("%s: %s item %q is not name=PERMISSION", yamlPos(nodes[i]), k.Value, item))
				}
				p, ok := parsePerm(ps)
				if !ok {
					return nil, where(fmt.Errorf("%s: %s item %q: %q is not PUB, SUB, PUB|SUB or DENY", yamlPos(nodes[i]), k.Value, item, strings.TrimSpace(ps)))
				}
				dst[name] = p
			}
		}
	}
	return a, nil
}
