// Package mysqldb opens the MySQL or MariaDB database of usher's SQL stores
// (mysqlbooking, mysqlanalytics) the one way they share: a mysql:// URL
// turned into a go-sql-driver DSN with the settings the stores rely on
// (times in UTC, matched rather than changed rows, strict SQL mode), a
// bounded pool, and the classification of the driver's errors.
package mysqldb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"time"

	"github.com/go-sql-driver/mysql"
)

// DefaultConnectTimeout bounds opening one connection (dial and handshake)
// at Open when the URL has no timeout parameter.
const DefaultConnectTimeout = 5 * time.Second

// Config turns a URL mysql://user:pass@host:port/db?param=value into the
// driver's configuration. The query's parameters are the driver's own
// (timeout, readTimeout, tls, …); these are always set: parseTime and loc
// (UTC), clientFoundRows (an UPDATE reports the rows it matched),
// interpolateParams (one round trip a statement),
// time_zone '+00:00' and sql_mode STRICT_ALL_TABLES plus NO_ZERO_DATE.
func Config(rawURL string) (*mysql.Config, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, errors.New("not a URL") // url's error repeats the password
	}
	if u.Scheme != "mysql" || u.Host == "" {
		return nil, errors.New("want mysql://user:password@host:port/database")
	}
	db := u.Path
	if len(db) > 0 && db[0] == '/' {
		db = db[1:]
	}
	if db == "" {
		return nil, errors.New("want a database name in the path: mysql://user:password@host:port/database")
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "3306")
	}
	dsn := "tcp(" + host + ")/" + db
	if u.RawQuery != "" {
		dsn += "?" + u.RawQuery
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	cfg.Logger = quiet{} // the stores return errors; the driver's log would repeat them
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.ClientFoundRows = true
	// Arguments are interpolated by the driver (escaped for the
	// connection's utf8mb4), so a statement is one round trip, not three
	// (prepare, execute, close).
	cfg.InterpolateParams = true
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	cfg.Params["sql_mode"] = "'STRICT_ALL_TABLES,NO_ZERO_DATE,NO_ENGINE_SUBSTITUTION'"
	return cfg, nil
}

// Open opens a pool of at most poolSize connections to the database at
// rawURL and checks that it answers within the URL's timeout (else
// DefaultConnectTimeout). multi allows several statements per Exec (the
// migrations). The error of a bad URL wraps invalid; of a server that does
// not answer, unavailable.
func Open(ctx context.Context, rawURL string, poolSize int, multi bool, invalid, unavailable error) (*sql.DB, error) {
	if poolSize < 1 {
		return nil, fmt.Errorf("pool size %d: %w", poolSize, invalid)
	}
	cfg, err := Config(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", invalid, err)
	}
	cfg.MultiStatements = multi
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultConnectTimeout
		cfg.Timeout = timeout
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", invalid, err)
	}
	db := sql.OpenDB(readCommitted{conn})
	db.SetMaxOpenConns(poolSize)
	db.SetMaxIdleConns(poolSize)
	// Below the server's default wait_timeout (8 h) and any proxy's idle
	// cut: a pooled connection the server closed is not handed out.
	db.SetConnMaxLifetime(5 * time.Minute)
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("%w: %w", unavailable, err)
	}
	return db, nil
}

// readCommitted opens connections in READ COMMITTED: the conditional
// UPDATEs and locking reads see the latest committed rows in either level,
// but READ COMMITTED takes no gap locks and reads the source of an
// INSERT … SELECT without locking it, so concurrent Decide calls conflict
// on the rows they write only. (SET SESSION, because MariaDB before 11.1
// and MySQL name the variable differently.)
type readCommitted struct{ driver.Connector }

func (c readCommitted) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.(driver.ExecerContext).ExecContext(ctx, `SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED`, nil); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// Error numbers the stores tell apart.
const (
	ErDupEntry       = 1062 // a UNIQUE or PRIMARY KEY
	ErNoReferenced   = 1452 // a FOREIGN KEY: the parent row does not exist
	ErLockWait       = 1205
	ErDeadlock       = 1213
	ErAutoIncRead    = 1467 // InnoDB: the AUTO-INC lock lost a deadlock (MariaDB)
	ErCheckMariaDB   = 4025 // a CHECK constraint
	ErCheckMySQL     = 3819
	erConCount       = 1040 // too many connections
	erServerShutdown = 1053
	erOutOfResources = 1041
	erReadOnly       = 1290 // --read-only (a replica, a failover in progress)
	erQueryKilled    = 1317 // query execution interrupted
)

// Code returns err's server error number, 0 if it is not a server error.
func Code(err error) uint16 {
	if e, ok := errors.AsType[*mysql.MySQLError](err); ok {
		return e.Number
	}
	return 0
}

// Invalid reports an error of the input: a constraint (SQLSTATE class 23)
// or a bad value (class 22).
func Invalid(err error) bool {
	e, ok := errors.AsType[*mysql.MySQLError](err)
	if !ok {
		return false
	}
	class := string(e.SQLState[:2])
	return class == "23" || class == "22" || e.Number == ErCheckMariaDB || e.Number == ErCheckMySQL
}

// Unavailable reports whether err means the server could not be reached or
// could not serve: a broken or refused connection, a timeout, the caller's
// context ending, or a server that is out of connections, shutting down,
// read-only or waiting too long for a lock.
func Unavailable(err error) bool {
	switch Code(err) {
	case erConCount, erServerShutdown, erOutOfResources, erReadOnly, erQueryKilled, ErLockWait:
		return true
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return true
	}
	return errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// quiet is a mysql.Logger that drops what the driver would print.
type quiet struct{}

func (quiet) Print(...any) {}
