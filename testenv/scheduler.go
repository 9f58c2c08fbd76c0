package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"sigs.k8s.io/yaml"
)

// schedulerQPS is the client rate of the in-process kube-scheduler: high, so the
// scheduler and not its client throttle is measured.
const schedulerQPS = 5000

type schedulerProcess struct {
	done <-chan error
}

// schedulerConfigFile writes the KubeSchedulerConfiguration the scheduler runs
// with: the given file (or the default profile) with the client pointed at this
// API server, a high QPS unless the file sets one, and leader election off.
func schedulerConfigFile(dataDir, kubeconfig, given string) (string, error) {
	cfg := map[string]any{
		"apiVersion": "kubescheduler.config.k8s.io/v1",
		"kind":       "KubeSchedulerConfiguration",
	}
	if given != "" {
		data, err := os.ReadFile(given)
		if err != nil {
			return "", fmt.Errorf("reading scheduler configuration: %w", err)
		}
		cfg = map[string]any{}
		if err := yaml.Unmarshal(data, &cfg); err != nil {
			return "", fmt.Errorf("scheduler configuration %s: %w", given, err)
		}
	}
	conn, _ := cfg["clientConnection"].(map[string]any)
	if conn == nil {
		conn = map[string]any{}
	}
	conn["kubeconfig"] = kubeconfig
	if _, ok := conn["qps"]; !ok {
		conn["qps"] = schedulerQPS
	}
	if _, ok := conn["burst"]; !ok {
		conn["burst"] = schedulerQPS
	}
	cfg["clientConnection"] = conn
	cfg["leaderElection"] = map[string]any{"leaderElect": false}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dataDir, "kube-scheduler.yaml")
	return path, os.WriteFile(path, out, 0o600)
}

func startScheduler(ctx context.Context, dataDir, kubeconfig, given string) (*schedulerProcess, error) {
	config, err := schedulerConfigFile(dataDir, kubeconfig, given)
	if err != nil {
		return nil, err
	}
	opts := options.NewOptions()
	fs := pflag.NewFlagSet("kube-scheduler", pflag.ContinueOnError)
	for _, f := range opts.Flags.FlagSets {
		fs.AddFlagSet(f)
	}
	// No serving port: nothing here scrapes the scheduler, and a fixed port
	// would collide between parallel test runs.
	if err := fs.Parse([]string{"--config=" + config, "--secure-port=0"}); err != nil {
		return nil, fmt.Errorf("flags: %w", err)
	}
	cc, sched, err := app.Setup(ctx, opts)
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, cc, sched)
	}()
	return &schedulerProcess{done: done}, nil
}
