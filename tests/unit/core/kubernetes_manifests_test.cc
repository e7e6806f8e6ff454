// deploy/kubernetes/ is a standalone session cluster as Flink's Kubernetes
// setup: a ConfigMap with config.yaml, a JobManager Deployment and Service, a
// TaskManager Deployment and a shared checkpoint volume. No cluster runs
// here; the manifests are checked against what the sluice binary accepts, so
// they cannot drift from it: the ConfigMap's config.yaml loads with Sluice's
// own parser (an unknown or misspelt key fails), every -D in a container's
// args is a registered option with a valid value, containers run only the
// `jobmanager` / `taskmanager` verbs, the Service and container ports are the
// ports the config makes the processes listen on, the config is mounted
// where SLUICE_CONF_DIR points, and the checkpoint directory is on a
// ReadWriteMany volume every container mounts.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <sluice/core/config.h>
#include <sluice/core/config_options.h>

namespace sluice {
namespace kubernetes_manifests_test {
namespace {

namespace fs = std::filesystem;

const fs::path kManifestDir = SLUICE_TEST_DATA_DIR "/../../deploy/kubernetes";

// The Kubernetes objects of deploy/kubernetes/*.yaml, each with the file it came from.
struct Object {
  std::string file;
  YAML::Node node;

  std::string kind() const { return node["kind"].as<std::string>(""); }
  std::string name() const { return node["metadata"]["name"].as<std::string>(""); }
  std::string where() const { return file + ": " + kind() + " " + name(); }
};

std::vector<Object> loadObjects() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(kManifestDir)) {
    if (entry.path().extension() == ".yaml" || entry.path().extension() == ".yml") {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<Object> objects;
  for (const fs::path& file : files) {
    for (const YAML::Node& doc : YAML::LoadAllFromFile(file.string())) {
      if (doc.IsNull()) continue;  // an empty document between "---"
      objects.push_back({file.filename().string(), doc});
    }
  }
  return objects;
}

const std::vector<Object>& objects() {
  static const std::vector<Object> all = loadObjects();
  return all;
}

std::vector<const Object*> objectsOfKind(const std::string& kind) {
  std::vector<const Object*> out;
  for (const Object& o : objects()) {
    if (o.kind() == kind) out.push_back(&o);
  }
  return out;
}

const Object* findObject(const std::string& kind, const std::string& name) {
  for (const Object& o : objects()) {
    if (o.kind() == kind && o.name() == name) return &o;
  }
  return nullptr;
}

const Object& configMap() {
  auto maps = objectsOfKind("ConfigMap");
  EXPECT_EQ(maps.size(), 1u) << "deploy/kubernetes/ must hold exactly one ConfigMap";
  if (maps.empty()) throw std::runtime_error("no ConfigMap in deploy/kubernetes/");
  return *maps.front();
}

// The ConfigMap's config.yaml, loaded as the processes load it.
Result<Configuration> clusterConfig() {
  const Object& map = configMap();
  const YAML::Node text = map.node["data"]["config.yaml"];
  if (!text.IsScalar()) {
    return Status::invalidArgument(map.where() + " has no data entry config.yaml");
  }
  return Configuration::fromYamlString(text.as<std::string>(), map.file + ":config.yaml");
}

// The Deployment whose containers run this verb; one per verb.
const Object* deploymentRunning(const std::string& verb) {
  const Object* found = nullptr;
  for (const Object* d : objectsOfKind("Deployment")) {
    for (const YAML::Node& c : d->node["spec"]["template"]["spec"]["containers"]) {
      if (c["args"].IsSequence() && c["args"].size() > 0 &&
          c["args"][0].as<std::string>() == verb) {
        EXPECT_EQ(found, nullptr) << "two Deployments run '" << verb << "'";
        found = d;
      }
    }
  }
  return found;
}

const YAML::Node containerOf(const Object& deployment) {
  const YAML::Node containers = deployment.node["spec"]["template"]["spec"]["containers"];
  EXPECT_TRUE(containers.IsSequence() && containers.size() == 1)
      << deployment.where() << ": expected one container";
  return containers[0];
}

std::vector<std::string> argsOf(const YAML::Node& container) {
  std::vector<std::string> args;
  for (const YAML::Node& a : container["args"]) args.push_back(a.as<std::string>());
  return args;
}

std::optional<std::string> envValue(const YAML::Node& container, const std::string& name) {
  for (const YAML::Node& e : container["env"]) {
    if (e["name"].as<std::string>("") == name && e["value"]) return e["value"].as<std::string>();
  }
  return std::nullopt;
}

bool envDefined(const YAML::Node& container, const std::string& name) {
  for (const YAML::Node& e : container["env"]) {
    if (e["name"].as<std::string>("") == name) return true;
  }
  return false;
}

// The -D options after the verb, parsed as the binary parses its command line.
Result<CommandLine> parseContainerArgs(const std::vector<std::string>& args) {
  std::vector<const char*> argv{"sluice"};
  for (size_t i = 1; i < args.size(); ++i) argv.push_back(args[i].c_str());
  return parseCommandLine(static_cast<int>(argv.size()), argv.data());
}

// The configuration a container's process runs with: the ConfigMap, then its -D.
Configuration effectiveConfig(const YAML::Node& container) {
  auto base = clusterConfig();
  EXPECT_TRUE(base.isOk()) << base.status().toString();
  Configuration config = base.isOk() ? base.value() : Configuration();
  auto cli = parseContainerArgs(argsOf(container));
  EXPECT_TRUE(cli.isOk()) << cli.status().toString();
  if (cli.isOk()) config.addAll(cli.value().config);
  return config;
}

// containerPort by port name, and the set of container port numbers.
std::map<std::string, int> namedPorts(const YAML::Node& container) {
  std::map<std::string, int> out;
  for (const YAML::Node& p : container["ports"]) {
    if (p["name"]) out[p["name"].as<std::string>()] = p["containerPort"].as<int>();
  }
  return out;
}

std::set<int> containerPorts(const YAML::Node& container) {
  std::set<int> out;
  for (const YAML::Node& p : container["ports"]) out.insert(p["containerPort"].as<int>());
  return out;
}

// The volume of a pod spec mounted at this path in the container, or null.
const YAML::Node volumeMountedAt(const Object& deployment, const YAML::Node& container,
                                 const std::string& path) {
  for (const YAML::Node& m : container["volumeMounts"]) {
    if (m["mountPath"].as<std::string>("") != path) continue;
    for (const YAML::Node& v : deployment.node["spec"]["template"]["spec"]["volumes"]) {
      if (v["name"].as<std::string>("") == m["name"].as<std::string>("")) return v;
    }
  }
  return YAML::Node();
}

// The mount path of the volume that holds this file path, or empty.
std::string mountHolding(const YAML::Node& container, const std::string& path) {
  std::string best;
  for (const YAML::Node& m : container["volumeMounts"]) {
    std::string mount = m["mountPath"].as<std::string>("");
    while (mount.size() > 1 && mount.back() == '/') mount.pop_back();
    if ((path == mount || path.rfind(mount + "/", 0) == 0) && mount.size() > best.size()) {
      best = mount;
    }
  }
  return best;
}

const std::set<std::string> kVerbs{"jobmanager", "taskmanager"};

TEST(KubernetesManifestsTest, ManifestsParseAndHoldTheSessionClusterObjects) {
  ASSERT_TRUE(fs::is_directory(kManifestDir)) << kManifestDir << " is missing";
  ASSERT_FALSE(objects().empty());
  for (const Object& o : objects()) {
    EXPECT_TRUE(o.node.IsMap()) << o.file << ": a document is not a map";
    EXPECT_FALSE(o.node["apiVersion"].as<std::string>("").empty()) << o.where();
    EXPECT_FALSE(o.kind().empty()) << o.file << ": an object without kind";
    EXPECT_FALSE(o.name().empty()) << o.file << ": an object without metadata.name";
  }
  EXPECT_EQ(objectsOfKind("ConfigMap").size(), 1u);
  EXPECT_EQ(objectsOfKind("Service").size(), 1u);
  EXPECT_EQ(objectsOfKind("Deployment").size(), 2u);
  EXPECT_EQ(objectsOfKind("PersistentVolumeClaim").size(), 1u);
  EXPECT_NE(deploymentRunning("jobmanager"), nullptr) << "no Deployment runs the jobmanager";
  EXPECT_NE(deploymentRunning("taskmanager"), nullptr) << "no Deployment runs the taskmanager";
}

TEST(KubernetesManifestsTest, ConfigMapConfigLoadsWithSluicesParser) {
  auto config = clusterConfig();
  ASSERT_TRUE(config.isOk()) << config.status().toString();
  const Configuration& c = config.value();
  // Reading every option checks every value's type as the processes will.
  for (const OptionDescriptor& option : registeredOptions()) {
    if (auto value = c.getString(option.key)) {
      Status st = option.validate(*value);
      EXPECT_TRUE(st.isOk()) << option.key << ": " << st.toString();
    }
  }
  // The JobManager is reached through the Service, and both roles listen on
  // every interface of their pod (the defaults are loopback).
  auto services = objectsOfKind("Service");
  ASSERT_EQ(services.size(), 1u);
  EXPECT_EQ(c.get(options::kJobManagerRpcAddress), services.front()->name());
  EXPECT_EQ(c.get(options::kJobManagerBindHost), "0.0.0.0");
  EXPECT_EQ(c.get(options::kTaskManagerBindHost), "0.0.0.0");
  // Fixed ports: a Service and containerPorts cannot name a port picked at start.
  EXPECT_NE(c.get(options::kTaskManagerRpcPort), 0);
  EXPECT_NE(c.get(options::kTaskManagerDataPort), 0);
  EXPECT_FALSE(c.get(options::kStateCheckpointsDir).empty());
}

TEST(KubernetesManifestsTest, ContainersRunOnlyClusterVerbsWithRegisteredOptions) {
  auto deployments = objectsOfKind("Deployment");
  ASSERT_FALSE(deployments.empty());
  for (const Object* d : deployments) {
    for (const YAML::Node& c : d->node["spec"]["template"]["spec"]["containers"]) {
      const std::string where = d->where() + " container " + c["name"].as<std::string>("");
      // The image's entrypoint is sluice; a command, if any, must be it too.
      if (c["command"]) {
        ASSERT_TRUE(c["command"].IsSequence()) << where;
        std::vector<std::string> command;
        for (const YAML::Node& a : c["command"]) command.push_back(a.as<std::string>());
        EXPECT_EQ(command, std::vector<std::string>{"sluice"}) << where;
      }
      std::vector<std::string> args = argsOf(c);
      ASSERT_FALSE(args.empty()) << where << ": no args (expected a verb)";
      EXPECT_TRUE(kVerbs.count(args[0]))
          << where << ": '" << args[0] << "' is not a verb (jobmanager or taskmanager)";
      auto cli = parseContainerArgs(args);
      ASSERT_TRUE(cli.isOk()) << where << ": " << cli.status().toString();
      EXPECT_TRUE(cli.value().remaining.empty())
          << where << ": unexpected argument '" << cli.value().remaining.front()
          << "' (only -D key=value follows the verb)";
      EXPECT_FALSE(cli.value().configFile.has_value())
          << where << ": the config comes from the ConfigMap through SLUICE_CONF_DIR, not -c";
      // Kubernetes leaves $(NAME) as written when the container has no such env.
      for (const std::string& a : args) {
        for (size_t at = a.find("$("); at != std::string::npos; at = a.find("$(", at + 2)) {
          size_t end = a.find(')', at);
          ASSERT_NE(end, std::string::npos) << where << ": " << a;
          std::string var = a.substr(at + 2, end - at - 2);
          EXPECT_TRUE(envDefined(c, var)) << where << ": $(" << var << ") has no env entry";
        }
      }
    }
  }
  // Each TaskManager advertises its own pod IP, the only address other pods reach it at.
  const Object* tm = deploymentRunning("taskmanager");
  ASSERT_NE(tm, nullptr);
  const YAML::Node container = containerOf(*tm);
  auto cli = parseContainerArgs(argsOf(container));
  ASSERT_TRUE(cli.isOk()) << cli.status().toString();
  auto host = cli.value().config.getString(options::kTaskManagerHost.key);
  ASSERT_TRUE(host.has_value()) << tm->where() << ": no -D taskmanager.host=$(POD_IP)";
  ASSERT_EQ(host->rfind("$(", 0), 0u) << *host;
  std::string var = host->substr(2, host->size() - 3);
  bool fromPodIp = false;
  for (const YAML::Node& e : container["env"]) {
    if (e["name"].as<std::string>("") == var) {
      fromPodIp = e["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>("") == "status.podIP";
    }
  }
  EXPECT_TRUE(fromPodIp) << tm->where() << ": " << var << " is not the downward API's status.podIP";
}

TEST(KubernetesManifestsTest, PortsAreTheConfiguredPorts) {
  const Object* jm = deploymentRunning("jobmanager");
  const Object* tm = deploymentRunning("taskmanager");
  ASSERT_NE(jm, nullptr);
  ASSERT_NE(tm, nullptr);
  const YAML::Node jmContainer = containerOf(*jm);
  const YAML::Node tmContainer = containerOf(*tm);
  Configuration jmConfig = effectiveConfig(jmContainer);
  Configuration tmConfig = effectiveConfig(tmContainer);
  const int rpcPort = jmConfig.get(options::kJobManagerRpcPort);
  const int restPort = jmConfig.get(options::kRestPort);
  const int tmRpcPort = tmConfig.get(options::kTaskManagerRpcPort);
  const int tmDataPort = tmConfig.get(options::kTaskManagerDataPort);

  EXPECT_EQ(containerPorts(jmContainer), (std::set<int>{rpcPort, restPort}))
      << jm->where() << ": containerPorts are not jobmanager.rpc.port and rest.port";
  EXPECT_EQ(containerPorts(tmContainer), (std::set<int>{tmRpcPort, tmDataPort}))
      << tm->where() << ": containerPorts are not taskmanager.rpc.port and taskmanager.data.port";
  // The TaskManagers reach the JobManager at the port in their own config.
  EXPECT_EQ(tmConfig.get(options::kJobManagerRpcPort), rpcPort);

  // The Service: its name is jobmanager.rpc.address, its ports are the
  // JobManager's, each targetPort (a number or a port name) is the same port
  // on the JobManager's container, and it selects the JobManager pods only.
  auto services = objectsOfKind("Service");
  ASSERT_EQ(services.size(), 1u);
  const Object& service = *services.front();
  EXPECT_EQ(service.name(), tmConfig.get(options::kJobManagerRpcAddress));
  std::set<int> servicePorts;
  std::map<std::string, int> jmNamed = namedPorts(jmContainer);
  for (const YAML::Node& p : service.node["spec"]["ports"]) {
    const int port = p["port"].as<int>();
    servicePorts.insert(port);
    int target = port;
    if (p["targetPort"]) {
      const std::string t = p["targetPort"].as<std::string>();
      if (!t.empty() &&
          std::all_of(t.begin(), t.end(), [](unsigned char ch) { return std::isdigit(ch) != 0; })) {
        target = std::stoi(t);
      } else {
        ASSERT_TRUE(jmNamed.count(t)) << service.where() << ": targetPort '" << t
                                      << "' is not a port name of the JobManager container";
        target = jmNamed[t];
      }
    }
    EXPECT_EQ(target, port) << service.where() << ": port " << port << " forwards to " << target;
  }
  EXPECT_EQ(servicePorts, (std::set<int>{rpcPort, restPort}))
      << service.where() << ": ports are not jobmanager.rpc.port and rest.port";
  const YAML::Node selector = service.node["spec"]["selector"];
  ASSERT_TRUE(selector.IsMap() && selector.size() > 0) << service.where() << ": no selector";
  auto selects = [&](const Object& d) {
    const YAML::Node labels = d.node["spec"]["template"]["metadata"]["labels"];
    for (const auto& kv : selector) {
      if (labels[kv.first.as<std::string>()].as<std::string>("") != kv.second.as<std::string>()) {
        return false;
      }
    }
    return true;
  };
  EXPECT_TRUE(selects(*jm)) << service.where() << " does not select " << jm->where();
  EXPECT_FALSE(selects(*tm)) << service.where() << " also selects " << tm->where();

  // Liveness probes knock on a port the process listens on.
  for (const auto& [d, c] : {std::pair{jm, jmContainer}, std::pair{tm, tmContainer}}) {
    const YAML::Node probe = c["livenessProbe"]["tcpSocket"]["port"];
    if (probe) {
      EXPECT_TRUE(containerPorts(c).count(probe.as<int>()))
          << d->where() << ": the liveness probe's port is not a container port";
    }
  }
}

TEST(KubernetesManifestsTest, ConfigIsMountedWhereSluiceConfDirPoints) {
  const std::string mapName = configMap().name();
  for (const Object* d : objectsOfKind("Deployment")) {
    for (const YAML::Node& c : d->node["spec"]["template"]["spec"]["containers"]) {
      const std::string where = d->where() + " container " + c["name"].as<std::string>("");
      auto confDir = envValue(c, "SLUICE_CONF_DIR");
      ASSERT_TRUE(confDir.has_value()) << where << ": no SLUICE_CONF_DIR";
      const YAML::Node volume = volumeMountedAt(*d, c, *confDir);
      ASSERT_TRUE(volume.IsMap()) << where << ": nothing is mounted at SLUICE_CONF_DIR "
                                  << *confDir;
      EXPECT_EQ(volume["configMap"]["name"].as<std::string>(""), mapName)
          << where << ": the volume at " << *confDir << " is not the ConfigMap " << mapName;
      // The ConfigMap's config.yaml must land as <SLUICE_CONF_DIR>/config.yaml.
      const YAML::Node items = volume["configMap"]["items"];
      if (items) {
        bool found = false;
        for (const YAML::Node& item : items) {
          found |= item["key"].as<std::string>("") == "config.yaml" &&
                   item["path"].as<std::string>("") == "config.yaml";
        }
        EXPECT_TRUE(found) << where << ": the volume does not map config.yaml to config.yaml";
      }
    }
  }
}

TEST(KubernetesManifestsTest, CheckpointDirectoryIsOnASharedVolumeEveryContainerMounts) {
  auto config = clusterConfig();
  ASSERT_TRUE(config.isOk()) << config.status().toString();
  for (const auto* option : {&options::kStateCheckpointsDir, &options::kStateSavepointsDir}) {
    std::string dir = config.value().get(*option);
    if (dir.empty()) continue;
    if (dir.rfind("file://", 0) == 0) dir = dir.substr(7);
    ASSERT_EQ(dir.rfind('/', 0), 0u) << option->key << " is not an absolute path: " << dir;
    for (const Object* d : objectsOfKind("Deployment")) {
      const YAML::Node c = containerOf(*d);
      const std::string mount = mountHolding(c, dir);
      ASSERT_FALSE(mount.empty()) << d->where() << ": no volume holds " << option->key << " "
                                  << dir;
      const YAML::Node volume = volumeMountedAt(*d, c, mount);
      const std::string claim = volume["persistentVolumeClaim"]["claimName"].as<std::string>("");
      ASSERT_FALSE(claim.empty()) << d->where() << ": " << mount << " is not a PVC";
      const Object* pvc = findObject("PersistentVolumeClaim", claim);
      ASSERT_NE(pvc, nullptr) << d->where() << ": no PersistentVolumeClaim " << claim;
      bool readWriteMany = false;
      for (const YAML::Node& m : pvc->node["spec"]["accessModes"]) {
        readWriteMany |= m.as<std::string>("") == "ReadWriteMany";
      }
      EXPECT_TRUE(readWriteMany) << pvc->where()
                                 << ": every pod writes checkpoints, so it must be ReadWriteMany";
    }
  }
}

}  // namespace
}  // namespace kubernetes_manifests_test
}  // namespace sluice
