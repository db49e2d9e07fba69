// Pod manifests the e2e tests and benchmarks write into an agent's manifest folder.

/** A host-network pod whose one container `c` sleeps for an hour; stops within 1 s. */
export function sleeperManifest(name: string, image: string): string {
  return `apiVersion: v1
kind: Pod
metadata:
  name: ${name}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers:
    - name: c
      image: ${image}
      command: ["sleep", "3600"]
`;
}
