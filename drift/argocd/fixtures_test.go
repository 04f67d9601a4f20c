package argocd

// The fixtures are what Git holds and what a kube-apiserver 1.37 stores for
// it after defaulting.

const deployConfigYAML = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels:
    app: web
spec:
  replicas: 2
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: web
        image: nginx:1.27
        args: ["--port=8080"]
        ports:
        - containerPort: 8080
        resources:
          limits:
            cpu: 1000m
            memory: 128Mi
`

const deployLiveYAML = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  uid: 9c1b6f0e-3a55-4a53-a7f4-7d3c0a1f2b11
  resourceVersion: "4711"
  generation: 1
  creationTimestamp: "2026-05-01T10:00:00Z"
  labels:
    app: web
  annotations:
    deployment.kubernetes.io/revision: "1"
spec:
  replicas: 2
  revisionHistoryLimit: 10
  progressDeadlineSeconds: 600
  selector:
    matchLabels:
      app: web
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 25%
      maxUnavailable: 25%
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: web
        image: nginx:1.27
        args: ["--port=8080"]
        imagePullPolicy: IfNotPresent
        ports:
        - containerPort: 8080
          protocol: TCP
        resources:
          limits:
            cpu: "1"
            memory: 128Mi
          requests:
            cpu: "1"
            memory: 128Mi
        terminationMessagePath: /dev/termination-log
        terminationMessagePolicy: File
      dnsPolicy: ClusterFirst
      restartPolicy: Always
      schedulerName: default-scheduler
      securityContext: {}
      terminationGracePeriodSeconds: 30
status:
  observedGeneration: 1
  replicas: 2
  readyReplicas: 2
`

// A custom resource: not in the scheme, so Argo CD uses a JSON merge patch
// and compares lists whole.
const gatewayConfigYAML = `
apiVersion: networking.example.com/v1
kind: Gateway
metadata:
  name: gw
  namespace: shop
spec:
  hosts:
  - shop.example.com
  servers:
  - port: 443
  tls:
    mode: SIMPLE
`

const gatewayLiveYAML = `
apiVersion: networking.example.com/v1
kind: Gateway
metadata:
  name: gw
  namespace: shop
  uid: 0f6d2b8c-1e4b-4c41-9a0e-55b1d2b0c7aa
  resourceVersion: "815"
  generation: 1
  creationTimestamp: "2026-05-01T10:00:00Z"
spec:
  hosts:
  - shop.example.com
  servers:
  - port: 443
  tls:
    mode: SIMPLE
`

const secretConfigYAML = `
apiVersion: v1
kind: Secret
metadata:
  name: db
  namespace: shop
stringData:
  password: s3cr3t
data:
  user: YWRtaW4=
`

// czNjcjN0 is base64("s3cr3t").
const secretLiveYAML = `
apiVersion: v1
kind: Secret
metadata:
  name: db
  namespace: shop
  uid: 2d0f7c1a-8a44-4d3b-b1b5-0c9e4f6a7d21
  resourceVersion: "99"
  creationTimestamp: "2026-05-01T10:00:00Z"
type: Opaque
data:
  password: czNjcjN0
  user: YWRtaW4=
`

const aggregatedRoleConfigYAML = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: monitoring
aggregationRule:
  clusterRoleSelectors:
  - matchLabels:
      rbac.example.com/aggregate-to-monitoring: "true"
rules: []
`

const aggregatedRoleLiveYAML = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: monitoring
  uid: 6a1f0c2e-7b3d-4e5f-8a9b-0c1d2e3f4a5b
  resourceVersion: "321"
  creationTimestamp: "2026-05-01T10:00:00Z"
aggregationRule:
  clusterRoleSelectors:
  - matchLabels:
      rbac.example.com/aggregate-to-monitoring: "true"
rules:
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch"]
`

const statefulSetConfigYAML = `
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
  namespace: shop
spec:
  serviceName: db
  replicas: 1
  selector:
    matchLabels:
      app: db
  template:
    metadata:
      labels:
        app: db
    spec:
      containers:
      - name: db
        image: postgres:17
  volumeClaimTemplates:
  - metadata:
      name: data
    spec:
      accessModes: ["ReadWriteOnce"]
      resources:
        requests:
          storage: 1Gi
`

const statefulSetLiveYAML = `
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
  namespace: shop
  uid: 3e2d1c0b-9a8f-4e7d-8c6b-5a4f3e2d1c0b
  resourceVersion: "77"
  generation: 1
  creationTimestamp: "2026-05-01T10:00:00Z"
spec:
  serviceName: db
  replicas: 1
  podManagementPolicy: OrderedReady
  revisionHistoryLimit: 10
  persistentVolumeClaimRetentionPolicy:
    whenDeleted: Retain
    whenScaled: Retain
  selector:
    matchLabels:
      app: db
  updateStrategy:
    type: RollingUpdate
    rollingUpdate:
      partition: 0
  template:
    metadata:
      labels:
        app: db
    spec:
      containers:
      - name: db
        image: postgres:17
        imagePullPolicy: IfNotPresent
        resources: {}
        terminationMessagePath: /dev/termination-log
        terminationMessagePolicy: File
      dnsPolicy: ClusterFirst
      restartPolicy: Always
      schedulerName: default-scheduler
      securityContext: {}
      terminationGracePeriodSeconds: 30
  volumeClaimTemplates:
  - apiVersion: v1
    kind: PersistentVolumeClaim
    metadata:
      name: data
    spec:
      accessModes: ["ReadWriteOnce"]
      resources:
        requests:
          storage: 1Gi
      volumeMode: Filesystem
    status:
      phase: Pending
`
