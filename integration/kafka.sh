#!/usr/bin/env bash
# integration/kafka.sh — a real Apache Kafka (KRaft, combined broker+controller
# nodes: one by default, three with EDDY_KAFKA_BROKERS=3) for eddy's integration
# tests, built from the jars on Maven Central. No Kafka distribution tarball and
# no Docker are needed: only Java 17+ and Maven.
#
# Usage: integration/kafka.sh <command>
#
#   start    download the jars if missing, write the config, format a FRESH
#            data dir, start the broker in the background, wait for
#            "Kafka Server started" and print the bootstrap address on stdout.
#            If this script's broker is already running, just print the address.
#   stop     SIGTERM the broker, SIGKILL it after EDDY_KAFKA_STOP_TIMEOUT s.
#   kill9    SIGKILL the broker at once (crash tests); the data dir is kept.
#   restart  stop (gracefully) if running, then start again KEEPING the data
#            dir (topics, offsets and transactions survive).
#   status   print "running pid N at HOST:PORT" (exit 0) or "stopped" (exit 1).
#   logs     print the tail of the broker log (logs -f follows it).
#   addr     print the bootstrap address (the running broker's, else the configured one).
#   With EDDY_KAFKA_BROKERS=3, stop, kill9 and restart take node numbers (1-3;
#   none: every node), restart starts the named nodes together and waits for all,
#   and there are also:
#   pause N / resume N  SIGSTOP / SIGCONT node N (a broker that stops answering).
#   pid N    print node N's pid (exit 1 when it is not running).
#   logs N   node N's log.
#   secure-env  with EDDY_KAFKA_SECURE=1: print, as shell assignments, the
#            settings a client of the SASL_SSL listener needs (EDDY_SECURE_BROKERS,
#            EDDY_TLS_CA_FILE, EDDY_SASL_MECHANISM, EDDY_SASL_USERNAME,
#            EDDY_SASL_PASSWORD): eval "$(EDDY_KAFKA_SECURE=1 integration/kafka.sh secure-env)".
#   download only fetch the jars (for caching in CI).
#
# Environment (all optional):
#   EDDY_KAFKA_HOME             cache + state dir  (default: integration/.kafka)
#   EDDY_KAFKA_PORT             broker port        (default: 19092)
#   EDDY_KAFKA_CONTROLLER_PORT  controller port    (default: 19093)
#   EDDY_KAFKA_START_TIMEOUT    seconds to wait for readiness (default: 120)
#   EDDY_KAFKA_STOP_TIMEOUT     seconds before SIGKILL on stop (default: 30)
#   EDDY_KAFKA_HEAP             JVM heap flags (default: "-Xms256m -Xmx512m")
#   EDDY_KAFKA_JVM_OPTS         other JVM flags (default: Kafka's own, "-XX:+UseG1GC
#                               -XX:MaxGCPauseMillis=20"; test.sh uses a lighter set)
#   JAVA_HOME                   Java 17+ to use (default: java on PATH)
#   EDDY_KAFKA_SECURE           1: secured mode (below)
#   EDDY_KAFKA_SECURE_PORT      SASL_SSL port      (default: broker port + 2)
#   EDDY_KAFKA_EXPIRED_PORT     EXPIRED (SSL) port (default: broker port + 3)
#   EDDY_KAFKA_BROKERS          1 (default) or 3: a three-node cluster (below)
#   EDDY_KAFKA_DEBUG_LOGGERS    comma-separated broker loggers to log at DEBUG
#
# Three nodes (EDDY_KAFKA_BROKERS=3): each node is a combined broker+controller
# (node.id 1-3, a static quorum of three voters), so it can run beside the single
# broker of the same home: its state is under EDDY_KAFKA_HOME/cluster3/node-N/,
# broker ports EDDY_KAFKA_PORT+0,1,2 (default 19192-19194), controller ports
# EDDY_KAFKA_CONTROLLER_PORT+0,1,2 (default 19195-19197), heap "-Xms128m -Xmx384m"
# per node. Replicated as a production cluster: default.replication.factor=3,
# min.insync.replicas=2, and the same for the offsets topic and the transaction
# state log. A broker is fenced 4 s after its last heartbeat (killed or paused).
# Two nodes down lose the controller quorum and leave partitions below
# min.insync.replicas: producers must wait until one comes back. The secured mode
# is for the single broker only.
#
# Secured mode (EDDY_KAFKA_SECURE=1) adds a SASL_SSL listener: a CA and a broker
# certificate (for 127.0.0.1 and localhost) made with openssl under secure/, SCRAM-
# SHA-256 and -512 users "admin" (super user) and "eddy-app" created when the storage
# is formatted, OAUTHBEARER with Kafka's unsecured JWT validator (an unsigned token
# whose "sub" is the principal; a test broker only), and the KRaft StandardAuthorizer with ACLs for eddy-app (what an eddy
# application needs: ALL on topics, groups and transactional IDs, IdempotentWrite on
# the cluster). The PLAINTEXT listener stays (its principal, ANONYMOUS, is a super
# user), so the tests and tools that use it keep working. For the tests of expired
# certificates, the SASL_SSL listener checks a client certificate if one is presented
# (ssl.client.auth=requested), and an SSL listener EXPIRED serves a broker certificate
# that expired in 2020; a client certificate that expired is made beside it.
#
# Files under EDDY_KAFKA_HOME:
#   kafka-<version>/libs/   the jars (kept across runs)
#   config/                 server.properties, log4j2.properties (rewritten on start)
#   data/                   log.dirs (wiped by start, kept by restart)
#   logs/server.log         the broker log (previous run: server.log.1)
#   logs/kafka.out          the JVM's stdout/stderr
#   kafka.pid               pid of the running broker
set -euo pipefail

readonly KAFKA_VERSION=4.1.1
readonly SCALA_VERSION=2.13
readonly LOG4J_VERSION=2.24.3
readonly DEPENDENCY_PLUGIN_VERSION=3.8.1
readonly HOST=127.0.0.1

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KHOME=${EDDY_KAFKA_HOME:-$script_dir/.kafka}
JVM_OPTS=${EDDY_KAFKA_JVM_OPTS:--XX:+UseG1GC -XX:MaxGCPauseMillis=20}
NODES=${EDDY_KAFKA_BROKERS:-1}
case $NODES in
1)
	BASE_PORT=${EDDY_KAFKA_PORT:-19092}
	BASE_CONTROLLER_PORT=${EDDY_KAFKA_CONTROLLER_PORT:-19093}
	HEAP=${EDDY_KAFKA_HEAP:--Xms256m -Xmx512m}
	STATE=$KHOME
	;;
3)
	BASE_PORT=${EDDY_KAFKA_PORT:-19192}
	BASE_CONTROLLER_PORT=${EDDY_KAFKA_CONTROLLER_PORT:-$((BASE_PORT + 3))}
	HEAP=${EDDY_KAFKA_HEAP:--Xms128m -Xmx384m}
	STATE=$KHOME/cluster3
	;;
*)
	printf 'kafka.sh: ERROR: EDDY_KAFKA_BROKERS=%s: want 1 or 3\n' "$NODES" >&2
	exit 2
	;;
esac
START_TIMEOUT=${EDDY_KAFKA_START_TIMEOUT:-120}
STOP_TIMEOUT=${EDDY_KAFKA_STOP_TIMEOUT:-30}

DIST_DIR=$KHOME/kafka-$KAFKA_VERSION
LIBS_DIR=$DIST_DIR/libs
ADDR_FILE=$STATE/kafka.addr
SECURE=${EDDY_KAFKA_SECURE:-0}
SECURE_PORT=${EDDY_KAFKA_SECURE_PORT:-$((BASE_PORT + 2))}
EXPIRED_PORT=${EDDY_KAFKA_EXPIRED_PORT:-$((BASE_PORT + 3))}
SECURE_DIR=$KHOME/secure
readonly SECURE_USER=eddy-app

# set_node N points the per-node variables at node N (1 in single-broker mode, whose
# files stay where they always were).
set_node() {
	NODE=$1
	BROKER_PORT=$((BASE_PORT + NODE - 1))
	CONTROLLER_PORT=$((BASE_CONTROLLER_PORT + NODE - 1))
	local dir=$STATE
	if ((NODES > 1)); then
		dir=$STATE/node-$NODE
	fi
	CONFIG_DIR=$dir/config
	DATA_DIR=$dir/data
	LOG_DIR=$dir/logs
	PID_FILE=$dir/kafka.pid
	CLUSTER_ID_FILE=$DATA_DIR/.eddy-cluster-id
}
set_node 1

# all_nodes prints 1..NODES. pick_nodes checks node numbers and puts them in PICKED
# (none given: every node).
all_nodes() { seq 1 "$NODES"; }
pick_nodes() {
	PICKED=()
	if (($# == 0)); then
		mapfile -t PICKED < <(all_nodes)
		return
	fi
	local n
	for n in "$@"; do
		[[ $n =~ ^[0-9]+$ ]] && ((n >= 1 && n <= NODES)) || die "node $n: want a number from 1 to $NODES"
		PICKED+=("$n")
	done
}

# bootstrap prints every node's broker address, comma-separated.
bootstrap() {
	local n out=()
	for n in $(all_nodes); do
		out+=("$HOST:$((BASE_PORT + n - 1))")
	done
	(
		IFS=,
		printf '%s\n' "${out[*]}"
	)
}

# quorum_voters is controller.quorum.voters: id@host:port of every node.
quorum_voters() {
	local n out=()
	for n in $(all_nodes); do
		out+=("$n@$HOST:$((BASE_CONTROLLER_PORT + n - 1))")
	done
	(
		IFS=,
		printf '%s\n' "${out[*]}"
	)
}

log() { printf 'kafka.sh: %s\n' "$*" >&2; }
die() {
	printf 'kafka.sh: ERROR: %s\n' "$*" >&2
	exit 1
}

java_bin() {
	if [[ -n ${JAVA_HOME:-} && -x $JAVA_HOME/bin/java ]]; then
		printf '%s\n' "$JAVA_HOME/bin/java"
	elif command -v java >/dev/null 2>&1; then
		command -v java
	else
		die "java not found: Kafka $KAFKA_VERSION needs Java 17+ (install e.g. openjdk-17-jre-headless, or set JAVA_HOME)"
	fi
}

check_java() {
	local java version major
	java=$(java_bin)
	version=$("$java" -version 2>&1 | awk -F'"' '/version/ {print $2; exit}')
	major=${version%%.*}
	if [[ $major == 1 ]]; then # 1.8.0_x
		major=$(cut -d. -f2 <<<"$version")
	fi
	if ! [[ $major =~ ^[0-9]+$ ]] || ((major < 17)); then
		die "Kafka $KAFKA_VERSION needs Java 17+, but $java is version '${version:-unknown}'"
	fi
}

valid_port() { [[ $1 =~ ^[0-9]+$ ]] && (($1 > 0 && $1 < 65536)); }

# port_open HOST PORT: true if something accepts TCP connections there.
port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# running_pid prints the broker's pid and succeeds if it is alive.
running_pid() {
	local pid
	[[ -f $PID_FILE ]] || return 1
	pid=$(<"$PID_FILE")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	# Guard against pid reuse: the process must be our broker.
	if [[ -r /proc/$pid/cmdline ]] && ! tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'kafka\.Kafka'; then
		return 1
	fi
	printf '%s\n' "$pid"
}

download() {
	# kafka-tools: AclCommand, for the ACLs of the secured mode.
	if [[ -f $LIBS_DIR/kafka_$SCALA_VERSION-$KAFKA_VERSION.jar && -f $LIBS_DIR/kafka-tools-$KAFKA_VERSION.jar && -f $DIST_DIR/.complete ]]; then
		return 0
	fi
	command -v mvn >/dev/null 2>&1 || die "mvn not found: Maven is needed to fetch the Kafka jars from Maven Central (install e.g. the 'maven' package)"
	check_java
	log "downloading Kafka $KAFKA_VERSION jars from Maven Central into $LIBS_DIR"
	local start=$SECONDS tmp
	mkdir -p "$KHOME"
	tmp=$(mktemp -d "$KHOME/download.XXXXXX")
	cat >"$tmp/pom.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<!-- Generated by integration/kafka.sh: the jars of a Kafka $KAFKA_VERSION broker. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.github.eddy-streams</groupId>
  <artifactId>eddy-kafka-broker</artifactId>
  <version>$KAFKA_VERSION</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_$SCALA_VERSION</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka-tools</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>$LOG4J_VERSION</version>
    </dependency>
  </dependencies>
  <build>
    <pluginManagement>
      <plugins>
        <plugin>
          <groupId>org.apache.maven.plugins</groupId>
          <artifactId>maven-dependency-plugin</artifactId>
          <version>$DEPENDENCY_PLUGIN_VERSION</version>
        </plugin>
      </plugins>
    </pluginManagement>
  </build>
</project>
EOF
	if ! mvn -q -B -f "$tmp/pom.xml" dependency:copy-dependencies \
		-DincludeScope=runtime -DoutputDirectory="$tmp/libs" >"$tmp/mvn.log" 2>&1; then
		cat "$tmp/mvn.log" >&2
		rm -rf "$tmp"
		die "mvn could not download the Kafka $KAFKA_VERSION jars (output above)"
	fi
	[[ -f $tmp/libs/kafka_$SCALA_VERSION-$KAFKA_VERSION.jar ]] || die "mvn succeeded but kafka_$SCALA_VERSION-$KAFKA_VERSION.jar is missing in $tmp/libs"
	rm -rf "$DIST_DIR"
	mkdir -p "$DIST_DIR"
	mv "$tmp/libs" "$LIBS_DIR"
	mv "$tmp/pom.xml" "$DIST_DIR/pom.xml"
	rm -rf "$tmp"
	touch "$DIST_DIR/.complete"
	log "downloaded $(find "$LIBS_DIR" -name '*.jar' | wc -l) jars in $((SECONDS - start)) s"
}

write_config() {
	mkdir -p "$CONFIG_DIR" "$DATA_DIR" "$LOG_DIR"
	local rf=1 isr=1
	if ((NODES > 1)); then
		rf=3 isr=2
	fi
	cat >"$CONFIG_DIR/server.properties" <<EOF
# Generated by integration/kafka.sh. Node $NODE of $NODES, KRaft combined mode.
process.roles=broker,controller
node.id=$NODE
controller.quorum.voters=$(quorum_voters)
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://$HOST:$BROKER_PORT,CONTROLLER://$HOST:$CONTROLLER_PORT
advertised.listeners=PLAINTEXT://$HOST:$BROKER_PORT
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$DATA_DIR

# Replication: one replica of everything on a single node; on three, what a
# production cluster uses (an acknowledged acks=all write is on two brokers at least).
num.partitions=1
default.replication.factor=$rf
min.insync.replicas=$isr
offsets.topic.replication.factor=$rf
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$isr
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$isr
unclean.leader.election.enable=false

# Few internal partitions: faster startup and coordinator loading.
offsets.topic.num.partitions=4
transaction.state.log.num.partitions=4
share.coordinator.state.topic.num.partitions=1

# Tests create their topics explicitly.
auto.create.topics.enable=false
delete.topic.enable=true

# Fast groups: no initial rebalance delay, short session timeouts allowed
# (the same minimum as kafkatest's embedded broker).
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=100

# Abort timed-out (hanging) transactions within about a second.
transaction.abort.timed.out.transaction.cleanup.interval.ms=1000
transaction.remove.expired.transaction.cleanup.interval.ms=60000

# A restarted broker (restart after kill9) re-registers within seconds.
broker.heartbeat.interval.ms=500
broker.session.timeout.ms=4000

# Small machine.
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
log.cleaner.threads=1
log.cleaner.dedupe.buffer.size=33554432
EOF
	if [[ $SECURE == 1 ]]; then
		write_secure_config
	fi
	cat >"$CONFIG_DIR/log4j2.properties" <<EOF
# Generated by integration/kafka.sh: the broker logs to a file.
status = warn
name = eddy-kafka
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = $LOG_DIR/server.log
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.zk.name = org.apache.zookeeper
logger.zk.level = WARN
EOF
	# EDDY_KAFKA_DEBUG_LOGGERS: comma-separated logger names to log at DEBUG, for
	# chasing a broker-side problem (e.g. org.apache.kafka.coordinator.group).
	local i=0 logger
	local -a loggers
	IFS=, read -ra loggers <<<"${EDDY_KAFKA_DEBUG_LOGGERS:-}"
	for logger in "${loggers[@]}"; do
		i=$((i + 1))
		printf 'logger.debug%d.name = %s\nlogger.debug%d.level = DEBUG\n' "$i" "$logger" "$i" >>"$CONFIG_DIR/log4j2.properties"
	done
}

# secure_password NAME prints the password of NAME (admin, eddy-app, keystore),
# made at random once per home.
secure_password() {
	local f=$SECURE_DIR/$1.password
	if [[ ! -s $f ]]; then
		mkdir -p "$SECURE_DIR"
		(umask 077 && head -c 18 /dev/urandom | base64 | tr '+/' 'xy' >"$f")
	fi
	cat "$f"
}

# make_certificates writes a CA and a broker certificate signed by it (once per home).
make_certificates() {
	[[ -s $SECURE_DIR/broker.p12 ]] && return 0
	command -v openssl >/dev/null 2>&1 || die "openssl not found: secured mode makes its certificates with it"
	mkdir -p "$SECURE_DIR"
	local d=$SECURE_DIR out pass
	pass=$(secure_password keystore)
	if ! out=$(
		set -e
		openssl req -x509 -newkey rsa:2048 -nodes -keyout "$d/ca.key" -out "$d/ca.pem" -days 30 -subj "/CN=eddy kafka.sh CA" 2>&1
		openssl req -newkey rsa:2048 -nodes -keyout "$d/broker.key" -out "$d/broker.csr" -subj "/CN=localhost" 2>&1
		printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$d/broker.ext"
		openssl x509 -req -in "$d/broker.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
			-out "$d/broker.pem" -days 30 -extfile "$d/broker.ext" 2>&1
		openssl pkcs12 -export -in "$d/broker.pem" -inkey "$d/broker.key" -certfile "$d/ca.pem" \
			-name broker -out "$d/broker.p12" -passout "pass:$pass" 2>&1
	); then
		printf '%s\n' "$out" >&2
		die "openssl could not make the certificates in $d (output above)"
	fi
	log "made a CA ($d/ca.pem) and the broker's certificate"
}

# make_expired_certificates writes, signed by the CA, a broker certificate and a client
# certificate (CN=eddy-app) that expired in 2020 (once per home): the EXPIRED listener
# serves the first; a client presenting the second is refused by the SASL_SSL listener.
# openssl 3.0 has no -not_before for "x509 -req": "openssl ca" sets the dates.
make_expired_certificates() {
	[[ -s $SECURE_DIR/expired-broker.p12 && -s $SECURE_DIR/expired-client.pem ]] && return 0
	local d=$SECURE_DIR out pass
	pass=$(secure_password keystore)
	rm -rf "$d/ca-db"
	mkdir -p "$d/ca-db"
	: >"$d/ca-db/index.txt"
	printf '1000\n' >"$d/ca-db/serial"
	cat >"$d/ca-db/ca.cnf" <<EOF
[ca]
default_ca = eddy
[eddy]
database = $d/ca-db/index.txt
new_certs_dir = $d/ca-db
serial = $d/ca-db/serial
default_md = sha256
policy = any
unique_subject = no
[any]
commonName = supplied
EOF
	printf 'extendedKeyUsage=clientAuth\n' >"$d/expired-client.ext"
	if ! out=$(
		set -e
		for who in broker client; do
			cn=localhost ext=$d/broker.ext
			if [[ $who == client ]]; then
				cn=$SECURE_USER ext=$d/expired-client.ext
			fi
			openssl req -newkey rsa:2048 -nodes -keyout "$d/expired-$who.key" -out "$d/expired-$who.csr" -subj "/CN=$cn" 2>&1
			openssl ca -batch -notext -config "$d/ca-db/ca.cnf" -cert "$d/ca.pem" -keyfile "$d/ca.key" \
				-in "$d/expired-$who.csr" -out "$d/expired-$who.pem" -extfile "$ext" \
				-startdate 20200101000000Z -enddate 20200201000000Z 2>&1
		done
		openssl pkcs12 -export -in "$d/expired-broker.pem" -inkey "$d/expired-broker.key" -certfile "$d/ca.pem" \
			-name broker -out "$d/expired-broker.p12" -passout "pass:$pass" 2>&1
	); then
		printf '%s\n' "$out" >&2
		die "openssl could not make the expired certificates in $d (output above)"
	fi
	log "made a broker and a client certificate that expired in 2020 ($d/expired-*.pem)"
}

write_secure_config() {
	make_certificates
	make_expired_certificates
	local listeners advertised pass
	pass=$(secure_password keystore)
	listeners="PLAINTEXT://$HOST:$BROKER_PORT,SASL_SSL://$HOST:$SECURE_PORT,EXPIRED://$HOST:$EXPIRED_PORT,CONTROLLER://$HOST:$CONTROLLER_PORT"
	advertised="PLAINTEXT://$HOST:$BROKER_PORT,SASL_SSL://$HOST:$SECURE_PORT,EXPIRED://$HOST:$EXPIRED_PORT"
	sed -i -e "s|^listeners=.*|listeners=$listeners|" -e "s|^advertised.listeners=.*|advertised.listeners=$advertised|" \
		-e "s|^listener.security.protocol.map=.*|listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,EXPIRED:SSL|" \
		"$CONFIG_DIR/server.properties"
	cat >>"$CONFIG_DIR/server.properties" <<EOF

# Secured mode (EDDY_KAFKA_SECURE=1): SASL_SSL with SCRAM, StandardAuthorizer.
sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256,OAUTHBEARER
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
# OAUTHBEARER with Kafka's built-in unsecured validator (no sasl.server.callback.handler
# class: OAuthBearerUnsecuredValidatorCallbackHandler): it accepts an unsigned JWT
# ("alg":"none") whose "sub" claim is the principal and whose "exp" has not passed.
# For tests only: anyone can make such a token. (The sub claim below is the broker's own
# login, which it does not use: inter-broker traffic is PLAINTEXT.)
listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="admin";
ssl.keystore.type=PKCS12
ssl.keystore.location=$SECURE_DIR/broker.p12
ssl.keystore.password=$pass
ssl.key.password=$pass
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
# ANONYMOUS is the principal of the PLAINTEXT and CONTROLLER listeners (the broker
# itself, the plaintext tests).
super.users=User:admin;User:ANONYMOUS
# The SASL_SSL listener checks a client certificate when one is presented (an expired
# one is refused in the handshake) and does not require one.
ssl.truststore.type=PEM
ssl.truststore.location=$SECURE_DIR/ca.pem
listener.name.sasl_ssl.ssl.client.auth=requested
# The EXPIRED listener (SSL) serves a certificate that expired in 2020: no client that
# checks certificates gets through its handshake (were one to skip the check, its
# principal would be ANONYMOUS, a super user: a test broker only).
listener.name.expired.ssl.keystore.type=PKCS12
listener.name.expired.ssl.keystore.location=$SECURE_DIR/expired-broker.p12
listener.name.expired.ssl.keystore.password=$pass
listener.name.expired.ssl.key.password=$pass
EOF
}

# acl_command runs Kafka's AclCommand through the PLAINTEXT listener (ANONYMOUS is a
# super user).
acl_command() {
	"$(java_bin)" -Xmx256m -Dlog4j2.configurationFile="$CONFIG_DIR/log4j2.properties" \
		-cp "$LIBS_DIR/*" org.apache.kafka.tools.AclCommand --bootstrap-server "$HOST:$BROKER_PORT" "$@" 2>&1
}

# add_acls grants eddy-app what an eddy application needs.
add_acls() {
	local out
	if ! out=$(acl_command --add --allow-principal "User:$SECURE_USER" --operation All \
		--topic '*' --group '*' --transactional-id '*'); then
		printf '%s\n' "$out" >&2
		die "adding the ACLs of $SECURE_USER failed (output above)"
	fi
	if ! out=$(acl_command --add --allow-principal "User:$SECURE_USER" --operation IdempotentWrite --cluster); then
		printf '%s\n' "$out" >&2
		die "adding the cluster ACL of $SECURE_USER failed (output above)"
	fi
	log "ACLs of User:$SECURE_USER added"
}

cmd_secure_env() {
	[[ $SECURE == 1 ]] || die "secure-env needs EDDY_KAFKA_SECURE=1"
	[[ -s $SECURE_DIR/ca.pem ]] || die "no secured broker was started in $KHOME"
	printf 'EDDY_SECURE_BROKERS=%s:%s\n' "$HOST" "$SECURE_PORT"
	printf 'EDDY_TLS_CA_FILE=%s\n' "$SECURE_DIR/ca.pem"
	printf 'EDDY_SASL_MECHANISM=SCRAM-SHA-512\n'
	printf 'EDDY_SASL_USERNAME=%s\n' "$SECURE_USER"
	printf 'EDDY_SASL_PASSWORD=%s\n' "$(secure_password "$SECURE_USER")"
	# For the tests of certificates that expired: the EXPIRED listener, and a client
	# certificate (CN=eddy-app) with its key.
	printf 'EDDY_SECURE_EXPIRED_BROKERS=%s:%s\n' "$HOST" "$EXPIRED_PORT"
	printf 'EDDY_SECURE_EXPIRED_CERT_FILE=%s\n' "$SECURE_DIR/expired-client.pem"
	printf 'EDDY_SECURE_EXPIRED_KEY_FILE=%s\n' "$SECURE_DIR/expired-client.key"
	printf 'export EDDY_SECURE_BROKERS EDDY_TLS_CA_FILE EDDY_SASL_MECHANISM EDDY_SASL_USERNAME EDDY_SASL_PASSWORD EDDY_SECURE_EXPIRED_BROKERS EDDY_SECURE_EXPIRED_CERT_FILE EDDY_SECURE_EXPIRED_KEY_FILE\n'
}

new_cluster_id() {
	# A Kafka cluster ID is a UUID in URL-safe base64 without padding. One that starts
	# with '-' would be read as an option by kafka-storage (1 in 64 of them); Kafka's own
	# Uuid.randomUuid() skips those too.
	local id
	while :; do
		id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | cut -c1-22)
		if [[ $id != -* ]]; then
			printf '%s\n' "$id"
			return
		fi
	done
}

# format_storage formats the current node's data dir unless it is formatted. The
# nodes of a cluster share the cluster ID cmd_start made ($STATE/cluster-id).
format_storage() {
	local cluster_id out
	if [[ -f $DATA_DIR/meta.properties ]]; then
		return 0
	fi
	if ((NODES > 1)); then
		cluster_id=$(<"$STATE/cluster-id")
	else
		cluster_id=$(new_cluster_id)
	fi
	log "formatting $DATA_DIR (cluster id $cluster_id)"
	local scram=()
	if [[ $SECURE == 1 ]]; then
		local user mech
		for user in admin "$SECURE_USER"; do
			for mech in SCRAM-SHA-512 SCRAM-SHA-256; do
				scram+=(--add-scram "$mech=[name=$user,password=$(secure_password "$user")]")
			done
		done
	fi
	if ! out=$("$(java_bin)" -Xmx256m -Dlog4j2.configurationFile="$CONFIG_DIR/log4j2.properties" \
		-cp "$LIBS_DIR/*" kafka.tools.StorageTool format \
		-t "$cluster_id" -c "$CONFIG_DIR/server.properties" --ignore-formatted "${scram[@]}" 2>&1); then
		printf '%s\n' "$out" >&2
		die "formatting the storage in $DATA_DIR failed (output above)"
	fi
	printf '%s\n' "$cluster_id" >"$CLUSTER_ID_FILE"
}

print_log_tail() {
	local f
	for f in "$LOG_DIR/kafka.out" "$LOG_DIR/server.log"; do
		if [[ -s $f ]]; then
			printf '==> %s (last 40 lines) <==\n' "$f" >&2
			tail -n 40 "$f" >&2
		fi
	done
}

# prepare_node checks the current node's ports, writes its config, rotates its log
# and formats its data dir if needed.
prepare_node() {
	local port
	valid_port "$BROKER_PORT" || die "EDDY_KAFKA_PORT=$BROKER_PORT is not a port"
	valid_port "$CONTROLLER_PORT" || die "EDDY_KAFKA_CONTROLLER_PORT=$CONTROLLER_PORT is not a port"
	[[ $BROKER_PORT != "$CONTROLLER_PORT" ]] || die "broker and controller ports are both $BROKER_PORT"
	for port in "$BROKER_PORT" "$CONTROLLER_PORT"; do
		if port_open "$HOST" "$port"; then
			die "port $HOST:$port is already in use by another process (not this script's broker); stop it or set EDDY_KAFKA_PORT / EDDY_KAFKA_CONTROLLER_PORT"
		fi
	done
	write_config
	if [[ -s $LOG_DIR/server.log ]]; then
		mv -f "$LOG_DIR/server.log" "$LOG_DIR/server.log.1"
	fi
	: >"$LOG_DIR/server.log"
	: >"$LOG_DIR/kafka.out"
	format_storage
}

# spawn_node starts the current node's JVM in the background and waits for its pid.
spawn_node() {
	local java
	java=$(java_bin)
	rm -f "$PID_FILE"
	log "starting Kafka $KAFKA_VERSION node $NODE on $HOST:$BROKER_PORT (controller $HOST:$CONTROLLER_PORT), home $STATE"
	# setsid: the broker must outlive this script and not receive the
	# caller's terminal signals; the inner shell writes its own pid, which
	# exec turns into the JVM's pid.
	# shellcheck disable=SC2086,SC2016 # HEAP and JVM_OPTS hold several flags; $$ is the inner shell's
	setsid bash -c 'echo $$ >"$0"; exec "$@"' "$PID_FILE" \
		"$java" $HEAP $JVM_OPTS -Djava.awt.headless=true \
		-Dlog4j2.configurationFile="$CONFIG_DIR/log4j2.properties" \
		-Dkafka.logs.dir="$LOG_DIR" \
		-cp "$LIBS_DIR/*" kafka.Kafka "$CONFIG_DIR/server.properties" \
		</dev/null >>"$LOG_DIR/kafka.out" 2>&1 9>&- &
	local deadline=$((SECONDS + START_TIMEOUT))
	while [[ ! -s $PID_FILE ]]; do
		((SECONDS < deadline)) || die "node $NODE did not start (no pid file after ${START_TIMEOUT}s)"
		sleep 0.05
	done
}

# wait_node waits until the current node logs that it started (by the deadline, in
# SECONDS).
wait_node() {
	local deadline=$1 pid
	pid=$(<"$PID_FILE")
	while :; do
		if grep -q 'Kafka Server started' "$LOG_DIR/server.log" 2>/dev/null; then
			break
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			print_log_tail
			rm -f "$PID_FILE"
			die "the broker (node $NODE, pid $pid) exited during startup; logs above, full logs in $LOG_DIR"
		fi
		if ((SECONDS >= deadline)); then
			print_log_tail
			kill -KILL "$pid" 2>/dev/null || true
			rm -f "$PID_FILE"
			die "node $NODE did not log 'Kafka Server started' within ${START_TIMEOUT}s (EDDY_KAFKA_START_TIMEOUT); killed it; logs above"
		fi
		sleep 0.2
	done
	# The line is logged once the listeners are bound; double-check.
	port_open "$HOST" "$BROKER_PORT" || die "node $NODE logged 'Kafka Server started' but $HOST:$BROKER_PORT does not accept connections"
}

# launch starts the given nodes on their data dirs (formatting those without one) and
# waits until every one is ready. A node of a cluster starts only once a quorum of
# controllers runs, so the nodes start together and are waited for afterwards.
launch() {
	local n start=$SECONDS pids=() status=0
	download
	check_java
	if ((NODES > 1 && $# > 1)); then
		# Config and formatting (a JVM each) in parallel.
		for n in "$@"; do
			(
				set_node "$n"
				prepare_node
			) &
			pids+=($!)
		done
		for n in "${pids[@]}"; do
			wait "$n" || status=$?
		done
		((status == 0)) || die "preparing the nodes failed (messages above)"
	else
		for n in "$@"; do
			set_node "$n"
			prepare_node
		done
	fi
	for n in "$@"; do
		set_node "$n"
		spawn_node
	done
	local deadline=$((SECONDS + START_TIMEOUT))
	for n in "$@"; do
		set_node "$n"
		wait_node "$deadline"
		log "node $n started (pid $(<"$PID_FILE"))"
	done
	set_node 1
	log "Kafka started in $((SECONDS - start)) s"
	if [[ $SECURE == 1 ]]; then
		add_acls
		log "SASL_SSL listener at $HOST:$SECURE_PORT; client settings: EDDY_KAFKA_SECURE=1 $0 secure-env"
	fi
	bootstrap >"$ADDR_FILE"
	bootstrap
}

# addr prints the bootstrap address(es) of the running broker(s), or the configured ones.
addr() {
	if [[ -s $ADDR_FILE ]] && any_running; then
		cat "$ADDR_FILE"
	else
		bootstrap
	fi
}

# any_running succeeds if a node of this mode runs.
any_running() {
	local n
	for n in $(all_nodes); do
		set_node "$n"
		if running_pid >/dev/null; then
			set_node 1
			return 0
		fi
	done
	set_node 1
	return 1
}

cmd_start() {
	local n running=() pid
	for n in $(all_nodes); do
		set_node "$n"
		if pid=$(running_pid); then
			running+=("$n")
		fi
	done
	set_node 1
	if ((${#running[@]} == NODES)); then
		local a
		a=$(addr)
		log "already running (node(s) ${running[*]}) at $a"
		if [[ $a != "$(bootstrap)" ]]; then
			log "WARNING: it listens on $a, not on the requested $(bootstrap); stop it first to change ports"
		fi
		printf '%s\n' "$a"
		return 0
	fi
	if ((${#running[@]} > 0)); then
		die "node(s) ${running[*]} of $NODES run: stop them first, or restart the others ($0 restart N)"
	fi
	if ((NODES > 1)) && [[ $SECURE == 1 ]]; then
		die "the secured mode (EDDY_KAFKA_SECURE=1) is for the single broker only"
	fi
	rm -f "$ADDR_FILE"
	for n in $(all_nodes); do
		set_node "$n"
		rm -f "$PID_FILE"
		rm -rf "$DATA_DIR"
	done
	if ((NODES > 1)); then
		mkdir -p "$STATE"
		new_cluster_id >"$STATE/cluster-id"
	fi
	# shellcheck disable=SC2046 # one node number per word
	launch $(all_nodes)
}

cmd_restart() {
	local n
	pick_nodes "$@"
	local nodes=("${PICKED[@]}")
	for n in "${nodes[@]}"; do
		set_node "$n"
		if running_pid >/dev/null; then
			stop_nodes "$n"
		fi
	done
	launch "${nodes[@]}"
}

# wait_gone PID SECONDS: wait for the process to exit.
wait_gone() {
	local pid=$1 deadline=$((SECONDS + $2))
	while kill -0 "$pid" 2>/dev/null; do
		((SECONDS < deadline)) || return 1
		sleep 0.1
	done
}

# stop_nodes sends SIGTERM to the given nodes together, then SIGKILL to those still
# running after STOP_TIMEOUT.
stop_nodes() {
	local n pid start=$SECONDS stopping=()
	for n in "$@"; do
		set_node "$n"
		if ! pid=$(running_pid); then
			rm -f "$PID_FILE"
			log "node $n not running"
			continue
		fi
		log "stopping node $n (pid $pid)"
		kill -CONT "$pid" 2>/dev/null || true
		kill -TERM "$pid" 2>/dev/null || true
		stopping+=("$n:$pid")
	done
	local deadline=$((SECONDS + STOP_TIMEOUT)) np
	for np in "${stopping[@]}"; do
		n=${np%%:*} pid=${np#*:}
		set_node "$n"
		if ! wait_gone "$pid" $((deadline - SECONDS)); then
			log "node $n still running after ${STOP_TIMEOUT}s; sending SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
			wait_gone "$pid" 10 || die "pid $pid survived SIGKILL"
		fi
		rm -f "$PID_FILE"
	done
	set_node 1
	((${#stopping[@]} == 0)) || log "stopped in $((SECONDS - start)) s"
}

cmd_stop() {
	pick_nodes "$@"
	stop_nodes "${PICKED[@]}"
	any_running || rm -f "$ADDR_FILE"
}

cmd_kill9() {
	local n pid
	pick_nodes "$@"
	for n in "${PICKED[@]}"; do
		set_node "$n"
		if ! pid=$(running_pid); then
			rm -f "$PID_FILE"
			log "node $n not running"
			continue
		fi
		log "SIGKILL node $n (pid $pid)"
		kill -KILL "$pid" 2>/dev/null || true
		wait_gone "$pid" 10 || die "pid $pid survived SIGKILL"
		rm -f "$PID_FILE"
	done
}

# cmd_signal SIG N: send SIG to node N (pause: STOP, resume: CONT).
cmd_signal() {
	local sig=$1 pid
	shift
	(($# == 1)) || die "pause and resume take one node number"
	pick_nodes "$1"
	set_node "${PICKED[0]}"
	pid=$(running_pid) || die "node $NODE is not running"
	kill "-$sig" "$pid"
	log "SIG$sig node $NODE (pid $pid)"
}

cmd_pid() {
	(($# == 1)) || die "pid takes one node number"
	pick_nodes "$1"
	set_node "${PICKED[0]}"
	running_pid
}

cmd_status() {
	local n pid up=0
	for n in $(all_nodes); do
		set_node "$n"
		if pid=$(running_pid); then
			up=$((up + 1))
			if ((NODES > 1)); then
				printf 'node %s running pid %s at %s:%s (home %s)\n' "$n" "$pid" "$HOST" "$BROKER_PORT" "$STATE"
			else
				printf 'running pid %s at %s (home %s)\n' "$pid" "$(addr)" "$KHOME"
			fi
		elif ((NODES > 1)); then
			printf 'node %s stopped (home %s)\n' "$n" "$STATE"
		else
			printf 'stopped (home %s)\n' "$KHOME"
		fi
	done
	((up == NODES))
}

cmd_logs() {
	if ((NODES > 1)) && [[ ${1:-} =~ ^[0-9]+$ ]]; then
		pick_nodes "$1"
		set_node "${PICKED[0]}"
		shift
	fi
	[[ -f $LOG_DIR/server.log ]] || die "no log yet in $LOG_DIR"
	if [[ ${1:-} == -f ]]; then
		exec tail -n 100 -F "$LOG_DIR/server.log"
	fi
	if [[ -s $LOG_DIR/kafka.out ]]; then
		printf '==> %s <==\n' "$LOG_DIR/kafka.out"
		tail -n 50 "$LOG_DIR/kafka.out"
		printf '==> %s <==\n' "$LOG_DIR/server.log"
	fi
	tail -n "${EDDY_KAFKA_LOG_LINES:-200}" "$LOG_DIR/server.log"
}

usage() {
	sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//' >&2
	exit 2
}

# with_lock serialises commands that change the brokers' state (per mode: the single
# broker and the cluster of one home do not wait for each other).
with_lock() {
	mkdir -p "$STATE"
	if command -v flock >/dev/null 2>&1; then
		exec 9>"$STATE/.lock"
		flock -w 300 9 || die "could not lock $STATE/.lock within 300 s"
	fi
	"$@"
}

main() {
	local cmd=${1:-}
	[[ $# -gt 0 ]] && shift
	case $cmd in
	start) with_lock cmd_start ;;
	stop) with_lock cmd_stop "$@" ;;
	kill9 | kill-9 | kill) with_lock cmd_kill9 "$@" ;;
	restart) with_lock cmd_restart "$@" ;;
	pause) cmd_signal STOP "$@" ;;
	resume) cmd_signal CONT "$@" ;;
	pid) cmd_pid "$@" ;;
	status) cmd_status ;;
	logs) cmd_logs "$@" ;;
	addr) addr ;;
	secure-env) cmd_secure_env ;;
	download) with_lock download ;;
	-h | --help | help) usage ;;
	*) usage ;;
	esac
}

main "$@"
