package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

type etcdServer struct {
	e         *embed.Etcd
	clientURL string
	done      <-chan error
}

// freeLoopbackPort returns a port that was free on 127.0.0.1 a moment ago.
func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func startEtcd(ctx context.Context, dataDir string) (*etcdServer, error) {
	clientPort, err := freeLoopbackPort()
	if err != nil {
		return nil, fmt.Errorf("finding a free port: %w", err)
	}
	peerPort, err := freeLoopbackPort()
	if err != nil {
		return nil, fmt.Errorf("finding a free port: %w", err)
	}
	cfg := embed.NewConfig()
	cfg.Name = "testenv"
	cfg.Dir = filepath.Join(dataDir, "etcd")
	cfg.LogLevel = "error"
	cfg.Logger = "zap"
	cfg.LogOutputs = []string{"stderr"}
	clientURL, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", clientPort))
	peerURL, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", peerPort))
	cfg.ListenClientUrls = []url.URL{*clientURL}
	cfg.AdvertiseClientUrls = []url.URL{*clientURL}
	cfg.ListenPeerUrls = []url.URL{*peerURL}
	cfg.AdvertisePeerUrls = []url.URL{*peerURL}
	cfg.InitialCluster = fmt.Sprintf("%s=%s", cfg.Name, peerURL.String())
	// Tests need no durability across machine crashes; skip fsync for speed.
	cfg.UnsafeNoFsync = true

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(readyTimeout):
		e.Close()
		return nil, fmt.Errorf("not ready within %s", readyTimeout)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
	done := make(chan error, 1)
	go func() {
		err, ok := <-e.Err()
		if ok && err != nil {
			done <- err
		}
	}()
	return &etcdServer{e: e, clientURL: clientURL.String(), done: done}, nil
}

func (s *etcdServer) stop() {
	stopped := make(chan struct{})
	go func() {
		s.e.Close()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
	}
}
