package tests

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"golang.org/x/sys/unix"
)

// openPty opens a pseudo-terminal pair: the master (read what the program writes) and the
// slave (the program's terminal).
func openPty() (master, slave *os.File, err error) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		return nil, nil, fmt.Errorf("unlock pty: %w", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		return nil, nil, fmt.Errorf("pty number: %w", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	// A terminal of 100 columns, 30 rows.
	if err := unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 30, Col: 100}); err != nil {
		m.Close()
		s.Close()
		return nil, nil, fmt.Errorf("pty size: %w", err)
	}
	return m, s, nil
}

// outputOnTerminal runs cmd with its standard output on a terminal (as a person running it
// sees it; standard error stays cmd.Stderr) and returns that output with the terminal's
// line endings turned back into "\n".
func outputOnTerminal(cmd *exec.Cmd) (string, error) { return onTerminal(cmd, false) }

// onTerminal runs cmd with standard output (or, with stderr, standard error) on a terminal
// and returns what it wrote there.
func onTerminal(cmd *exec.Cmd, stderr bool) (string, error) {
	m, s, err := openPty()
	if err != nil {
		return "", err
	}
	defer m.Close()
	if stderr {
		cmd.Stderr = s
	} else {
		cmd.Stdout = s
	}
	if err := cmd.Start(); err != nil {
		s.Close()
		return "", err
	}
	s.Close()
	var out bytes.Buffer
	copied := make(chan struct{})
	go func() {
		io.Copy(&out, m) // ends with EIO once the program and its children closed the terminal
		close(copied)
	}()
	err = cmd.Wait()
	<-copied
	return strings.ReplaceAll(out.String(), "\r\n", "\n"), err
}
