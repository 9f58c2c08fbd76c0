// Command testenv runs a real Kubernetes control plane for lockstep's tests and
// benchmarks: an embedded etcd, kube-apiserver v1.37 with every API lockstep uses,
// and optionally the real kube-scheduler v1.37, all in one process on loopback.
//
// Usage:
//
//	testenv KUBECONFIG_PATH [--kube-scheduler [CONFIG_FILE]] [--port N] [--data-dir DIR] [--parent-pid PID]
//
// It writes a kubeconfig (cluster-admin, bearer token) to KUBECONFIG_PATH, prints
// "ready" on stdout once the API server answers /readyz and the default namespace
// exists (and the scheduler runs, when asked), and runs until it gets SIGTERM or
// SIGINT, or until the process --parent-pid names is gone. It then stops every
// component and removes its data directory. SIGUSR1 restarts kube-apiserver alone
// (same etcd, certificates and port); "restarted" is printed once it is ready again.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// readyTimeout bounds each wait for a component to come up.
const readyTimeout = 90 * time.Second

type settings struct {
	kubeconfigPath  string
	scheduler       bool
	schedulerConfig string
	port            int
	dataDir         string
	parentPID       int
}

func usage() string {
	return "usage: testenv KUBECONFIG_PATH [--kube-scheduler [CONFIG_FILE]] [--port N] [--data-dir DIR] [--parent-pid PID]"
}

func parseArgs(args []string) (settings, error) {
	var s settings
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func() (string, error) {
			if i+1 >= len(args) {
				return "", fmt.Errorf("%s needs a value\n%s", a, usage())
			}
			i++
			return args[i], nil
		}
		switch a {
		case "--kube-scheduler":
			s.scheduler = true
			if i+1 < len(args) && len(args[i+1]) > 0 && args[i+1][0] != '-' && s.kubeconfigPath != "" {
				i++
				s.schedulerConfig = args[i]
			}
		case "--port":
			v, err := next()
			if err != nil {
				return s, err
			}
			if _, err := fmt.Sscanf(v, "%d", &s.port); err != nil || s.port < 1 || s.port > 65535 {
				return s, fmt.Errorf("--port %q: want a port number between 1 and 65535", v)
			}
		case "--data-dir":
			v, err := next()
			if err != nil {
				return s, err
			}
			s.dataDir = v
		case "--parent-pid":
			v, err := next()
			if err != nil {
				return s, err
			}
			if _, err := fmt.Sscanf(v, "%d", &s.parentPID); err != nil || s.parentPID < 1 {
				return s, fmt.Errorf("--parent-pid %q: want a process id", v)
			}
		case "-h", "--help":
			return s, errors.New(usage())
		default:
			if len(a) > 0 && a[0] == '-' {
				return s, fmt.Errorf("unknown flag %s\n%s", a, usage())
			}
			if s.kubeconfigPath != "" {
				return s, fmt.Errorf("unexpected argument %q\n%s", a, usage())
			}
			s.kubeconfigPath = a
		}
	}
	if s.kubeconfigPath == "" {
		return s, errors.New(usage())
	}
	return s, nil
}

func main() {
	s, err := parseArgs(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(2)
	}
	if err := run(s); err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(1)
	}
}

func run(s settings) (err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-signals
		cancel()
	}()
	restarts := make(chan os.Signal, 1)
	signal.Notify(restarts, syscall.SIGUSR1)
	if s.parentPID > 0 {
		go watchParent(ctx, s.parentPID, cancel)
	}

	dataDir := s.dataDir
	if dataDir == "" {
		if dataDir, err = os.MkdirTemp("", "lockstep-testenv-"); err != nil {
			return fmt.Errorf("creating a data directory: %w", err)
		}
	} else if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("creating data directory %s: %w", dataDir, err)
	}
	defer os.RemoveAll(dataDir)

	etcd, err := startEtcd(ctx, dataDir)
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	defer etcd.stop()

	creds, err := makeCredentials(filepath.Join(dataDir, "pki"))
	if err != nil {
		return fmt.Errorf("making certificates: %w", err)
	}
	apiCtx, stopAPI := context.WithCancel(ctx)
	api, err := startAPIServer(apiCtx, creds, etcd.clientURL, s.port)
	if err != nil {
		stopAPI()
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	if err := writeKubeconfig(s.kubeconfigPath, api); err != nil {
		return err
	}
	if err := api.waitReady(ctx, readyTimeout); err != nil {
		return fmt.Errorf("kube-apiserver: %w", err)
	}

	var sched *schedulerProcess
	if s.scheduler {
		sched, err = startScheduler(ctx, dataDir, s.kubeconfigPath, s.schedulerConfig)
		if err != nil {
			return fmt.Errorf("kube-scheduler: %w", err)
		}
	}

	fmt.Println("ready")
	os.Stdout.Sync()

running:
	for {
		select {
		case <-ctx.Done():
			break running
		case <-restarts:
			// A restart of kube-apiserver alone, as an upgrade or a crash would do
			// it: the same etcd, certificates and port; every connection drops.
			stopAPI()
			select {
			case <-api.done:
			case <-time.After(readyTimeout):
				return errors.New("kube-apiserver did not stop for a restart")
			}
			apiCtx, stopAPI = context.WithCancel(ctx)
			if api, err = startAPIServer(apiCtx, creds, etcd.clientURL, api.port); err != nil {
				stopAPI()
				return fmt.Errorf("restarting kube-apiserver: %w", err)
			}
			if err := api.waitReady(ctx, readyTimeout); err != nil {
				stopAPI()
				return fmt.Errorf("restarted kube-apiserver: %w", err)
			}
			fmt.Println("restarted")
			os.Stdout.Sync()
		case err := <-api.done:
			stopAPI()
			if err != nil {
				return fmt.Errorf("kube-apiserver stopped: %w", err)
			}
			return errors.New("kube-apiserver stopped")
		case err := <-etcd.done:
			stopAPI()
			return fmt.Errorf("etcd stopped: %w", err)
		case err := <-schedulerDone(sched):
			stopAPI()
			return fmt.Errorf("kube-scheduler stopped: %v", err)
		}
	}
	stopAPI()
	cancel()
	// Give the components a bounded time to stop cleanly.
	wait := time.After(10 * time.Second)
	if sched != nil {
		select {
		case <-sched.done:
		case <-wait:
		}
	}
	select {
	case <-api.done:
	case <-wait:
	}
	return nil
}

func schedulerDone(s *schedulerProcess) <-chan error {
	if s == nil {
		return nil
	}
	return s.done
}

// watchParent cancels the run when the parent process is gone, so a test that is
// killed never leaves a control plane behind.
func watchParent(ctx context.Context, pid int, cancel context.CancelFunc) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := syscall.Kill(pid, 0); err != nil && errors.Is(err, syscall.ESRCH) {
				fmt.Fprintf(os.Stderr, "testenv: parent process %d is gone, stopping\n", pid)
				cancel()
				return
			}
			if os.Getppid() == 1 && pid != 1 {
				cancel()
				return
			}
		}
	}
}
