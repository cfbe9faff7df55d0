package server

import (
	"fmt"
	"sort"
	"strings"

	"rsql/server/auth"
	"rsql/sql"
)

// Role, UserDef and AdminUser are auth's (server/auth), named here for the engine's callers.
type (
	Role    = auth.Role
	UserDef = auth.UserDef
)

const (
	RoleAdmin    = auth.RoleAdmin
	RoleReadOnly = auth.RoleReadOnly
	AdminUser    = auth.AdminUser
)

// SQLSTATE codes of users and roles.
const (
	codeInsufficientPrivilege = "42501"
	codeUndefinedObject       = "42704"
	codeObjectState           = "55000"
)

// User returns a copy of the user named name (case-insensitive).
func (c *Catalog) User(name string) (UserDef, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	u, ok := c.users[key(name)]
	if !ok {
		return UserDef{}, false
	}
	return *u, true
}

// Users returns copies of all users, sorted by name.
func (c *Catalog) Users() []UserDef {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]UserDef, 0, len(c.users))
	for _, u := range c.users {
		out = append(out, *u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// AddUser adds a user; 42710 when the name is taken.
func (c *Catalog) AddUser(u UserDef) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.users[key(u.Name)]; ok {
		return sql.Errorf(sql.CodeDuplicate, "user %q already exists", u.Name)
	}
	c.users[key(u.Name)] = &u
	if err := c.saveLocked(); err != nil {
		delete(c.users, key(u.Name))
		return err
	}
	return nil
}

// UpdateUser changes a user's secret (when secret is not nil) and role (when not ""). It
// refuses (55000) to take the admin role from the last admin.
func (c *Catalog) UpdateUser(name string, secret *string, role Role) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	u, ok := c.users[key(name)]
	if !ok {
		return sql.Errorf(codeUndefinedObject, "user %q does not exist", name)
	}
	if role != "" && role != RoleAdmin && u.Role == RoleAdmin && c.adminsLocked() == 1 {
		return sql.Errorf(codeObjectState, "user %q is the last admin: make another user ADMIN first", u.Name)
	}
	old := *u
	if secret != nil {
		u.Secret = *secret
	}
	if role != "" {
		u.Role = role
	}
	if err := c.saveLocked(); err != nil {
		*u = old
		return err
	}
	return nil
}

// DropUser removes a user; 42704 when there is none, 55000 for the last admin.
func (c *Catalog) DropUser(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	u, ok := c.users[key(name)]
	if !ok {
		return sql.Errorf(codeUndefinedObject, "user %q does not exist", name)
	}
	if u.Role == RoleAdmin && c.adminsLocked() == 1 {
		return sql.Errorf(codeObjectState, "user %q is the last admin: make another user ADMIN first", u.Name)
	}
	delete(c.users, key(name))
	if err := c.saveLocked(); err != nil {
		c.users[key(name)] = u
		return err
	}
	return nil
}

// adminsLocked counts the admins. c.mu must be held.
func (c *Catalog) adminsLocked() int {
	n := 0
	for _, u := range c.users {
		if u.Role == RoleAdmin {
			n++
		}
	}
	return n
}

// EnsureAdmin makes sure the server can be administered where passwords are checked. With
// a password, the user AdminUser exists as an admin with that password (created, or its
// password and role reset). Without one, when no admin exists, AdminUser is created with a
// generated password, which is returned (to be shown once); otherwise nothing changes and
// "" is returned.
func (c *Catalog) EnsureAdmin(password string) (generated string, err error) {
	if password == "" {
		c.mu.Lock()
		admins := c.adminsLocked()
		c.mu.Unlock()
		if admins > 0 {
			return "", nil
		}
		if generated, err = auth.RandomPassword(); err != nil {
			return "", err
		}
		password = generated
	}
	secret, err := auth.NewSecret(password)
	if err != nil {
		return "", err
	}
	if _, ok := c.User(AdminUser); ok {
		return generated, c.UpdateUser(AdminUser, &secret, RoleAdmin)
	}
	return generated, c.AddUser(UserDef{Name: AdminUser, Role: RoleAdmin, Secret: secret})
}

// authorize refuses (42501) a statement the session's role may not run.
func authorize(sess *Session, st sql.Statement) error {
	if sess.Role == RoleAdmin {
		return nil
	}
	switch s := st.(type) {
	case *sql.Select, *sql.ShowStmt, *sql.ShowVar, *sql.Describe, *sql.Explain, *sql.SetStmt, *sql.Transaction:
		return nil
	case *sql.AlterUser:
		if strings.EqualFold(s.Name, sess.User) && s.Role == "" {
			return nil // changing one's own password
		}
	}
	text, _ := st.Source()
	return sql.Errorf(codeInsufficientPrivilege, "permission denied: user %q is %s and may not run %s (an admin may)", sess.User, auth.RoleText(sess.Role), firstWords(text))
}

func roleOf(s string) Role {
	switch s {
	case "admin":
		return RoleAdmin
	case "read_only":
		return RoleReadOnly
	}
	return ""
}

// secretOf turns the PASSWORD of CREATE/ALTER USER into the secret to store: a
// SCRAM-SHA-256 secret as PostgreSQL writes it (what psql's \password sends) is kept as
// given; any other text is a password, hashed here.
func secretOf(password string) (string, error) {
	if auth.IsSecretText(password) {
		if err := auth.CheckSecret(password); err != nil {
			return "", sql.Errorf(sql.CodeInvalidValue, "the password looks like a SCRAM-SHA-256 secret but is not one: %v", err)
		}
		return password, nil
	}
	if password == "" {
		return "", sql.Errorf(sql.CodeInvalidValue, "the password must not be empty")
	}
	return auth.NewSecret(password)
}

func (e *Engine) createUser(sess *Session, s *sql.CreateUser) (*Result, error) {
	u := UserDef{Name: s.Name, Role: roleOf(s.Role)}
	if u.Role == "" {
		u.Role = RoleReadOnly
	}
	if s.Password != nil {
		secret, err := secretOf(*s.Password)
		if err != nil {
			return nil, err
		}
		u.Secret = secret
	}
	if err := e.cat.AddUser(u); err != nil {
		return nil, err
	}
	return &Result{Tag: "CREATE ROLE", Notice: e.trustNotice()}, nil
}

func (e *Engine) alterUser(sess *Session, s *sql.AlterUser) (*Result, error) {
	var secret *string
	if s.Password != nil {
		v, err := secretOf(*s.Password)
		if err != nil {
			return nil, err
		}
		secret = &v
	}
	if err := e.cat.UpdateUser(s.Name, secret, roleOf(s.Role)); err != nil {
		return nil, err
	}
	return &Result{Tag: "ALTER ROLE"}, nil
}

func (e *Engine) dropUser(sess *Session, s *sql.DropUser) (*Result, error) {
	if strings.EqualFold(s.Name, sess.User) {
		return nil, sql.Errorf(sql.CodeInUse, "current user %q cannot be dropped", sess.User)
	}
	if _, ok := e.cat.User(s.Name); !ok && s.IfExists {
		return &Result{Tag: "DROP ROLE", Notice: &Notice{Severity: "NOTICE", Code: "00000",
			Message: fmt.Sprintf("role %q does not exist, skipping", s.Name)}}, nil
	}
	if err := e.cat.DropUser(s.Name); err != nil {
		return nil, err
	}
	return &Result{Tag: "DROP ROLE"}, nil
}

func (e *Engine) showUsers() *Result {
	cols := sql.Schema{{Name: "name", Type: sql.TypeVarchar}, {Name: "role", Type: sql.TypeVarchar}, {Name: "password", Type: sql.TypeBool}}
	var rows []sql.Row
	for _, u := range e.cat.Users() {
		rows = append(rows, sql.Row{sql.Varchar(u.Name), sql.Varchar(string(u.Role)), sql.Bool(u.Secret != "")})
	}
	return &Result{Columns: cols, Rows: &sliceRows{rows: rows}, Tag: "SHOW"}
}

// trustNotice warns, when the Postgres wire does not check passwords, that a password just
// set is not checked yet.
func (e *Engine) trustNotice() *Notice {
	if !e.passwordsUnchecked.Load() {
		return nil
	}
	return &Notice{Severity: "WARNING", Code: "01000",
		Message: "this server accepts clients without a password (--auth trust, loopback only): passwords are checked once it runs with --auth scram-sha-256"}
}

// maxLoggedStatement is how much of a statement text a log line shows (auth.LogStatement).
const maxLoggedStatement = auth.MaxLoggedStatement

// logStatement is auth.LogStatement: a statement text as logs show it, passwords hidden.
func logStatement(text string) string { return auth.LogStatement(text) }

// AuthMethod, UserStore and the methods are auth's, named here for the engine's callers.
type (
	AuthMethod = auth.Method
	UserStore  = auth.UserStore
)

const (
	AuthTrust = auth.Trust
	AuthSCRAM = auth.SCRAM
)
