package main

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes a kubeconfig for the API server's admin user, atomically
// (a reader never sees half a file).
func writeKubeconfig(path string, a *apiServer) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testenv"] = &clientcmdapi.Cluster{
		Server:                   a.host,
		CertificateAuthorityData: a.creds.caPEM,
	}
	cfg.AuthInfos["lockstep-admin"] = &clientcmdapi.AuthInfo{Token: a.creds.token}
	cfg.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: "lockstep-admin", Namespace: "default"}
	cfg.CurrentContext = "testenv"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(dir, ".kubeconfig-")
	if err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	tmp.Close()
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}
