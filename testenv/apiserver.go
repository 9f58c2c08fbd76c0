package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
	"k8s.io/kubernetes/cmd/kube-apiserver/app/options"
)

// featureGates are the gates lockstep's APIs need: the Workload API (Workload,
// PodGroup in scheduling.k8s.io/v1beta1), CompositePodGroup (v1alpha3, which
// also needs TopologyAwareWorkloadScheduling), and workload-level ResourceClaims.
const featureGates = "GenericWorkload=true,TopologyAwareWorkloadScheduling=true,CompositePodGroup=true,DRAWorkloadResourceClaims=true"

// runtimeConfig serves the scheduling.k8s.io versions those gates need.
const runtimeConfig = "scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true"

type apiServer struct {
	port  int
	host  string
	creds *credentials
	done  <-chan error
}

func listenLoopback(port int) (net.Listener, int, error) {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, 0, fmt.Errorf("port %d on 127.0.0.1 is already taken: stop what listens there or choose another --port", port)
		}
		return nil, 0, err
	}
	return l, l.Addr().(*net.TCPAddr).Port, nil
}

// startAPIServer runs kube-apiserver until ctx ends. A restart calls it again with
// the same credentials, etcd and port, so clients keep their kubeconfig.
func startAPIServer(ctx context.Context, creds *credentials, etcdURL string, port int) (*apiServer, error) {
	listener, boundPort, err := listenLoopback(port)
	if err != nil {
		return nil, err
	}

	s := options.NewServerRunOptions()
	fs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	for _, f := range s.Flags().FlagSets {
		fs.AddFlagSet(f)
	}
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--advertise-address=127.0.0.1",
		"--bind-address=127.0.0.1",
		"--tls-cert-file=" + creds.servingCertFile,
		"--tls-private-key-file=" + creds.servingKeyFile,
		"--token-auth-file=" + creds.tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + creds.saKeyFile,
		"--service-account-signing-key-file=" + creds.saKeyFile,
		"--service-cluster-ip-range=10.0.0.0/16",
		// No controllers create what these admission plugins wait for.
		"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
		"--feature-gates=" + featureGates,
		"--runtime-config=" + runtimeConfig,
		"--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		// On shutdown, close watches after 2 s instead of waiting out the 60 s request
		// timeout for them, as production API servers behind a load balancer do.
		"--shutdown-send-retry-after=true",
	}
	if err := fs.Parse(args); err != nil {
		listener.Close()
		return nil, fmt.Errorf("flags: %w", err)
	}
	s.SecureServing.Listener = listener
	s.SecureServing.BindPort = boundPort
	if err := s.GenericServerRunOptions.ComponentGlobalsRegistry.Set(); err != nil {
		listener.Close()
		return nil, fmt.Errorf("feature gates: %w", err)
	}
	rest.SetDefaultWarningHandler(rest.NoWarnings{})

	// kube-apiserver registers its informers' name process-wide and never releases it;
	// the name is made here and released when the server stops, so it can run again.
	informerName, err := cache.NewInformerName("kube-apiserver")
	if err != nil {
		listener.Close()
		return nil, err
	}
	s.InformerName = informerName
	completed, err := s.Complete(ctx)
	if err != nil {
		informerName.Release()
		return nil, fmt.Errorf("options: %w", err)
	}
	if errs := completed.Validate(); len(errs) != 0 {
		informerName.Release()
		return nil, fmt.Errorf("options: %w", utilerrors.NewAggregate(errs))
	}
	done := make(chan error, 1)
	go func() {
		err := app.Run(ctx, completed)
		informerName.Release()
		done <- err
	}()
	return &apiServer{
		port:  boundPort,
		host:  fmt.Sprintf("https://127.0.0.1:%d", boundPort),
		creds: creds,
		done:  done,
	}, nil
}

func (a *apiServer) restConfig() *rest.Config {
	return &rest.Config{
		Host:            a.host,
		BearerToken:     a.creds.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: a.creds.caPEM},
		QPS:             1000,
		Burst:           1000,
	}
}

// waitReady waits until /readyz answers ok and the default namespace exists.
func (a *apiServer) waitReady(ctx context.Context, timeout time.Duration) error {
	client, err := kubernetes.NewForConfig(a.restConfig())
	if err != nil {
		return err
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-a.done:
			if err == nil {
				err = errors.New("stopped")
			}
			return false, err
		default:
		}
		status := 0
		body, err := client.CoreV1().RESTClient().Get().AbsPath("/readyz").Do(ctx).StatusCode(&status).Raw()
		if status != 200 {
			last = strings.TrimSpace(string(body))
			if err != nil && last == "" {
				last = err.Error()
			}
			return false, nil
		}
		if _, err := client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
			last = "namespace default: " + err.Error()
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("not ready within %s (%v); last answer: %s", timeout, err, last)
	}
	return nil
}
