#pragma once
// Every environment variable gangrun's processes share, spelled once: what a launcher gives
// its workers (PRODUCT.md, "The worker's environment"), what gangrun's commands read from
// their operator, and what gangrun's own processes hand each other. Writers and readers use
// these constants; a literal GANGRUN_ name elsewhere in the product is a bug.

namespace gangrun::env {

// --- Given to every worker: gangrun's own.
inline constexpr char kScheduler[] = "GANGRUN_SCHEDULER";    // the job's scheduler, host:port
inline constexpr char kRunId[] = "GANGRUN_RUN_ID";           // the job's run id
inline constexpr char kGeneration[] = "GANGRUN_GENERATION";  // 1, 2, ... per restart
inline constexpr char kToken[] = "GANGRUN_TOKEN";            // for `gangrun kv` in a worker
inline constexpr char kTlsCa[] = "GANGRUN_TLS_CA";
inline constexpr char kTlsCert[] = "GANGRUN_TLS_CERT";
inline constexpr char kTlsKey[] = "GANGRUN_TLS_KEY";
inline constexpr char kProgress[] = "GANGRUN_PROGRESS";  // the rank's progress socket
// The Python stack hook's (node/stacks.h): where to write, on which signal.
inline constexpr char kStackPrefix[] = "GANGRUN_STACK_";
inline constexpr char kStackDir[] = "GANGRUN_STACK_DIR";
inline constexpr char kStackSignal[] = "GANGRUN_STACK_SIGNAL";
// Set by the hook in the rank's own Python process: a Python it starts inherits it and stays
// quiet (node/python/sitecustomize.py). The node removes it from a worker's environment.
inline constexpr char kHookPid[] = "GANGRUN_HOOK_PID";
// Torch's NCCL flight recorder (node/flight_recorder.h): gangrun arms it unless the user did.
// Each pair: the name torch reads now, then the older one.
inline constexpr char kTorchTraceBuffer[] = "TORCH_FR_BUFFER_SIZE";
inline constexpr char kTorchTraceBufferOld[] = "TORCH_NCCL_TRACE_BUFFER_SIZE";
inline constexpr char kTorchDumpPipe[] = "TORCH_FR_DEBUG_INFO_PIPE_FILE";
inline constexpr char kTorchDumpPipeOld[] = "TORCH_NCCL_DEBUG_INFO_PIPE_FILE";
inline constexpr char kTorchDumpFile[] = "TORCH_FR_DUMP_TEMP_FILE";
inline constexpr char kTorchDumpFileOld[] = "TORCH_NCCL_DEBUG_INFO_TEMP_FILE";

// --- Given to a --health_check, with the launcher's own environment: this node's facts.
inline constexpr char kNodeName[] = "GANGRUN_NODE_NAME";
inline constexpr char kHostAddress[] = "GANGRUN_HOST_ADDRESS";
inline constexpr char kNodeRank[] = "GANGRUN_NODE_RANK";  // -1: not placed yet (or a spare)
inline constexpr char kLocalWorkerNum[] = "GANGRUN_LOCAL_WORKER_NUM";
inline constexpr char kLogDir[] = "GANGRUN_LOG_DIR";
inline constexpr char kSpare[] = "GANGRUN_SPARE";  // 1 while the node waits as a spare
// (and kRunId, kGeneration: the generation about to start)

// --- Given to every worker: torchrun's.
inline constexpr char kRank[] = "RANK";
inline constexpr char kLocalRank[] = "LOCAL_RANK";
inline constexpr char kWorldSize[] = "WORLD_SIZE";
inline constexpr char kLocalWorldSize[] = "LOCAL_WORLD_SIZE";
inline constexpr char kGroupRank[] = "GROUP_RANK";
inline constexpr char kGroupWorldSize[] = "GROUP_WORLD_SIZE";
inline constexpr char kRoleName[] = "ROLE_NAME";
inline constexpr char kRoleRank[] = "ROLE_RANK";
inline constexpr char kRoleWorldSize[] = "ROLE_WORLD_SIZE";
inline constexpr char kMasterAddr[] = "MASTER_ADDR";
inline constexpr char kMasterPort[] = "MASTER_PORT";
inline constexpr char kTorchRestartCount[] = "TORCHELASTIC_RESTART_COUNT";
inline constexpr char kTorchMaxRestarts[] = "TORCHELASTIC_MAX_RESTARTS";
inline constexpr char kTorchRunId[] = "TORCHELASTIC_RUN_ID";
inline constexpr char kTorchUseAgentStore[] = "TORCHELASTIC_USE_AGENT_STORE";
inline constexpr char kTorchTimerFile[] = "TORCHELASTIC_TIMER_FILE";
inline constexpr char kTorchErrorFile[] = "TORCHELASTIC_ERROR_FILE";

// --- Given to every worker: msrun's.
inline constexpr char kRankId[] = "RANK_ID";
inline constexpr char kRankSize[] = "RANK_SIZE";
inline constexpr char kRankTableFile[] = "RANK_TABLE_FILE";
inline constexpr char kDeviceId[] = "DEVICE_ID";
inline constexpr char kCudaVisibleDevices[] = "CUDA_VISIBLE_DEVICES";  // --virtual_local_rank
inline constexpr char kMsRole[] = "MS_ROLE";
inline constexpr char kMsWorkerNum[] = "MS_WORKER_NUM";
inline constexpr char kMsSchedHost[] = "MS_SCHED_HOST";
inline constexpr char kMsSchedPort[] = "MS_SCHED_PORT";
inline constexpr char kMsrunBindFile[] = "MSRUN_BIND_FILE";  // --bind_numa's .json file
inline constexpr char kMsTopoTimeout[] = "MS_TOPO_TIMEOUT";
inline constexpr char kMsNodeId[] = "MS_NODE_ID";
inline constexpr char kMsSimulationLevel[] = "MS_SIMULATION_LEVEL";
inline constexpr char kMsrunCpuList[] = "MSRUN_CPU_LIST";

// --- Read by gangrun's commands from their operator.
inline constexpr char kPrefix[] = "GANGRUN_";  // a launcher option's variable: GANGRUN_<OPTION>
inline constexpr char kMaster[] = "GANGRUN_MASTER";  // the daemon, for its clients and agents
inline constexpr char kLogLevel[] = "GANGRUN_LOG_LEVEL";
inline constexpr char kHandshakeTimeoutMs[] = "GANGRUN_HANDSHAKE_TIMEOUT_MS";
inline constexpr char kNoInit[] = "GANGRUN_NO_INIT";  // PID 1 without the init duties
inline constexpr char kMetricsPort[] = "GANGRUN_METRICS_PORT";
inline constexpr char kMetricsHost[] = "GANGRUN_METRICS_HOST";
inline constexpr char kEventLog[] = "GANGRUN_EVENT_LOG";
inline constexpr char kListen[] = "GANGRUN_LISTEN";
inline constexpr char kInsecure[] = "GANGRUN_INSECURE";
inline constexpr char kSlots[] = "GANGRUN_SLOTS";
inline constexpr char kAgentName[] = "GANGRUN_AGENT_NAME";
inline constexpr char kRunAs[] = "GANGRUN_RUN_AS";
inline constexpr char kLogRoot[] = "GANGRUN_LOG_ROOT";
// The agent's own --health_check and --topology_domain (not its jobs' launcher options).
inline constexpr char kAgentHealthCheck[] = "GANGRUN_AGENT_HEALTH_CHECK";
inline constexpr char kAgentTopologyDomain[] = "GANGRUN_AGENT_TOPOLOGY_DOMAIN";
// The daemon's quarantine of agents (README "Agents' standing").
inline constexpr char kQuarantineAfter[] = "GANGRUN_QUARANTINE_AFTER";
inline constexpr char kQuarantineWindow[] = "GANGRUN_QUARANTINE_WINDOW";
inline constexpr char kProbeInterval[] = "GANGRUN_PROBE_INTERVAL";

// --- Between gangrun's own processes; never passed on to workers.
inline constexpr char kInternalPrefix[] = "GANGRUN_INTERNAL_";
inline constexpr char kReadyFd[] = "GANGRUN_INTERNAL_READY_FD";             // --join False's pipe
inline constexpr char kNodeOnly[] = "GANGRUN_INTERNAL_NODE_ONLY";           // an agent's launcher
inline constexpr char kWorkerEnvFd[] = "GANGRUN_INTERNAL_WORKER_ENV_FD";    // a submitter's env
inline constexpr char kLaunchSpecFd[] = "GANGRUN_INTERNAL_LAUNCH_SPEC_FD";  // an agent's job
inline constexpr char kLaunchingAgent[] = "GANGRUN_INTERNAL_AGENT";         // which agent's
inline constexpr char kLaunchingDomain[] = "GANGRUN_INTERNAL_DOMAIN";       // and its domain
inline constexpr char kFileLimit[] = "GANGRUN_INTERNAL_NOFILE";             // the workers' nofile

}  // namespace gangrun::env
