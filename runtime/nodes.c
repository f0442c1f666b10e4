/* nodes.c: the job's nodes as the watchdog sees them across hosts. The watchdog's progress
 * board (watchdog.c) is node-local shared memory: it cannot tell a node whose processes all
 * stopped (a host that hangs) or died from ranks that wait in different communication
 * calls. So, after MPI_Init, the ranks learn where every rank runs (its host, its node's
 * index: MPI's shared-memory split), and each rank's watchdog thread sends a heartbeat
 * once a second to one rank of every other node over UDP: a side channel that needs
 * neither the job's communicators (which may be stuck) nor the main thread (which may be
 * in a long wait), and whose sends never block. A heartbeat carries where the sender
 * stands and how many ranks of its node still make progress. Whatever rank of a node
 * receives it writes it into the node's table of heard nodes (shared memory), so any rank
 * of the node can tell which node has gone silent: every process of that node stopped or
 * gone. Nothing runs on the main thread after start-up.
 *
 * Rank l of a node sends to rank l mod K of every other node of K ranks, so each rank
 * sends and receives about one packet per other node and second. The packet goes to every
 * IPv4 address of the receiver (up to RT_NODES_ADDRS: its interfaces, then the loopback);
 * one that reaches the sender's own host instead is dropped, since a node ignores packets
 * that claim to come from itself, and one of another job by the job's random key. */
/* getifaddrs and the interface flags are BSD extensions. */
#define _DEFAULT_SOURCE
#include "mpi_glue.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define RT_NODES_ADDRS 4
#define HOST_LEN       64
#define BEAT_US        1000000
#define MAGIC          0x42524842u /* "BRHB" */

/* What every rank says about itself at start-up (gathered by every rank). */
typedef struct {
    int32_t leader; /* the world rank of its node's first rank */
    int32_t local;  /* its index among its node's ranks */
    int32_t port;   /* its heartbeat socket's port (network order), or 0: none */
    int32_t naddr;
    uint32_t addr[RT_NODES_ADDRS]; /* network order */
    char host[HOST_LEN];
} rank_info;

typedef struct {
    uint32_t magic;
    uint32_t size;
    uint64_t job;
    int32_t node, rank;
    rt_node_beat beat;
} packet;

/* One entry of the node's table of heard nodes: written by whichever rank of this node
 * receives a heartbeat (a writer takes the entry by making seq odd; one that finds it
 * taken drops its packet, the next comes a second later), read under seq. */
typedef struct {
    _Atomic uint32_t seq;
    _Atomic int64_t heard_us; /* CLOCK_MONOTONIC of this host */
    int32_t rank;             /* the sender */
    rt_node_beat beat;
} heard;

static struct {
    _Atomic bool ready; /* the fields below are set; the watchdog thread may use them */
    int nodes, self;    /* node count, this rank's node */
    int *node_of;       /* world rank -> node */
    int *first;         /* node -> its first world rank */
    int *count;         /* node -> its rank count */
    int **ranks;        /* node -> its world ranks, in order */
    rank_info *info;    /* world rank -> what it said */
    int local;
    uint64_t job;
    int sock;
    int64_t start_us, next_beat_us;
    heard *table; /* node -> the last heartbeat from it; shared by this node's ranks */
    MPI_Win win;
    bool have_win;
} nd = {.sock = -1};

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* This host's IPv4 addresses: its interfaces' that are up, then the loopback. */
static int own_addrs(uint32_t *out)
{
    int n = 0;
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) == 0) {
        for (struct ifaddrs *i = ifs; i && n < RT_NODES_ADDRS - 1; i = i->ifa_next) {
            if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP) ||
                (i->ifa_flags & IFF_LOOPBACK))
                continue;
            out[n++] = ((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr.s_addr;
        }
        freeifaddrs(ifs);
    }
    out[n++] = htonl(INADDR_LOOPBACK);
    return n;
}

/* A non-blocking UDP socket on every interface, any port; its port, or 0 without one. */
static int open_socket(void)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0)
        return 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t len = sizeof a;
    if (bind(s, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(s, (struct sockaddr *)&a, &len) != 0) {
        close(s);
        return 0;
    }
    nd.sock = s;
    return a.sin_port;
}

static uint64_t job_key(void)
{
    uint64_t k = (uint64_t)mono_us() * 6364136223846793005ull ^ (uint64_t)getpid() << 32;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        uint64_t r;
        if (read(fd, &r, sizeof r) == (ssize_t)sizeof r)
            k ^= r;
        close(fd);
    }
    return k;
}

void rt_nodes_setup(MPI_Comm node)
{
    const int world = rt_opts_g.world_size, me = rt_opts_g.rank;
    rank_info mine = {.leader = me};
    if (MPI_Comm_rank(node, &mine.local) != MPI_SUCCESS)
        return;
    int leader = me;
    if (MPI_Bcast(&leader, 1, MPI_INT, 0, node) != MPI_SUCCESS)
        return;
    mine.leader = leader;
    struct utsname u;
    const char *host = uname(&u) == 0 ? u.nodename : "?";
    size_t hl = strlen(host) < HOST_LEN - 1 ? strlen(host) : HOST_LEN - 1;
    memcpy(mine.host, host, hl);
    mine.port = open_socket();
    mine.naddr = own_addrs(mine.addr);
    nd.job = job_key();
    nd.info = rt_xmalloc((size_t)world * sizeof *nd.info, "nodes");
    nd.node_of = rt_xmalloc((size_t)world * sizeof *nd.node_of, "nodes");
    if (MPI_Bcast(&nd.job, (int)sizeof nd.job, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS ||
        MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, nd.info, (int)sizeof mine, MPI_BYTE,
                      MPI_COMM_WORLD) != MPI_SUCCESS)
        return;
    /* Nodes are numbered in the order of their first ranks. */
    nd.nodes = 0;
    for (int r = 0; r < world; r++) {
        nd.info[r].host[HOST_LEN - 1] = 0;
        if (nd.info[r].leader == r)
            nd.nodes++;
    }
    nd.first = rt_xmalloc((size_t)nd.nodes * sizeof *nd.first, "nodes");
    nd.count = rt_xmalloc((size_t)nd.nodes * sizeof *nd.count, "nodes");
    nd.ranks = rt_xmalloc((size_t)nd.nodes * sizeof *nd.ranks, "nodes");
    for (int r = 0, n = 0; r < world; r++) {
        if (nd.info[r].leader == r) {
            nd.first[n] = r;
            nd.count[n] = 0;
            n++;
        }
    }
    for (int r = 0; r < world; r++) {
        int n = 0;
        while (n < nd.nodes - 1 && nd.first[n] != nd.info[r].leader)
            n++;
        nd.node_of[r] = n;
        nd.count[n]++;
    }
    for (int n = 0; n < nd.nodes; n++) {
        nd.ranks[n] = rt_xmalloc((size_t)nd.count[n] * sizeof **nd.ranks, "nodes");
        nd.count[n] = 0;
    }
    for (int r = 0; r < world; r++) {
        int n = nd.node_of[r];
        nd.ranks[n][nd.count[n]++] = r;
    }
    nd.self = nd.node_of[me];
    nd.local = mine.local;
    /* The table of heard nodes, one for the node's ranks. */
    void *base = NULL;
    MPI_Aint bytes = mine.local == 0 ? (MPI_Aint)nd.nodes * (MPI_Aint)sizeof(heard) : 0;
    if (nd.nodes > 1 &&
        MPI_Win_allocate_shared(bytes, 1, MPI_INFO_NULL, node, &base, &nd.win) == MPI_SUCCESS) {
        nd.have_win = true;
        MPI_Aint size;
        int unit;
        void *first = NULL;
        if (MPI_Win_shared_query(nd.win, 0, &size, &unit, &first) == MPI_SUCCESS && first &&
            size >= bytes) {
            if (mine.local == 0)
                memset(first, 0, (size_t)bytes);
            if (MPI_Barrier(node) == MPI_SUCCESS)
                nd.table = first;
        }
    }
    nd.start_us = mono_us();
    nd.next_beat_us = nd.start_us;
    atomic_store(&nd.ready, true);
}

int rt_nodes_count(void)
{
    return atomic_load(&nd.ready) ? nd.nodes : 0;
}

int rt_nodes_self(void)
{
    return nd.self;
}

int rt_nodes_of_rank(int rank)
{
    return nd.node_of[rank];
}

int rt_nodes_size(int node)
{
    return nd.count[node];
}

const char *rt_nodes_host(int node)
{
    return nd.info[nd.first[node]].host;
}

const char *rt_nodes_host_of_rank(int rank)
{
    return nd.info[rank].host;
}

void rt_nodes_ranks(int node, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = 0;
    const int *r = nd.ranks[node], k = nd.count[node];
    for (int i = 0; i < k && n + 32 < cap;) {
        int j = i;
        while (j + 1 < k && r[j + 1] == r[j] + 1)
            j++;
        const char *sep = i ? ", " : "";
        n += (size_t)(j == i ? snprintf(out + n, cap - n, "%s%d", sep, r[i])
                             : snprintf(out + n, cap - n, "%s%d-%d", sep, r[i], r[j]));
        i = j + 1;
        if (i < k && n + 32 >= cap)
            snprintf(out + n, cap - n, ", ...");
    }
}

static void receive(int64_t now)
{
    packet p;
    for (int i = 0; i < 1024; i++) {
        ssize_t n = recv(nd.sock, &p, sizeof p, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return;
        if (n != (ssize_t)sizeof p || p.magic != MAGIC || p.size != sizeof p || p.job != nd.job ||
            p.node < 0 || p.node >= nd.nodes || p.node == nd.self)
            continue;
        p.beat.op[sizeof p.beat.op - 1] = 0;
        p.beat.wait[sizeof p.beat.wait - 1] = 0;
        heard *h = &nd.table[p.node];
        uint32_t s = atomic_load(&h->seq);
        if ((s & 1) || !atomic_compare_exchange_strong(&h->seq, &s, s + 1))
            continue;
        h->rank = p.rank;
        h->beat = p.beat;
        atomic_store(&h->heard_us, now);
        atomic_store(&h->seq, s + 2);
    }
}

void rt_nodes_beat(int64_t now, const rt_node_beat *mine)
{
    if (!atomic_load(&nd.ready) || nd.nodes < 2 || !nd.table || nd.sock < 0)
        return;
    receive(now);
    if (now < nd.next_beat_us)
        return;
    nd.next_beat_us = now + BEAT_US;
    packet p = {.magic = MAGIC,
                .size = sizeof p,
                .job = nd.job,
                .node = nd.self,
                .rank = rt_opts_g.rank,
                .beat = *mine};
    for (int n = 0; n < nd.nodes; n++) {
        if (n == nd.self)
            continue;
        const rank_info *to = &nd.info[nd.ranks[n][nd.local % nd.count[n]]];
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = (in_port_t)to->port};
        for (int i = 0; to->port && i < to->naddr && i < RT_NODES_ADDRS; i++) {
            a.sin_addr.s_addr = to->addr[i];
            ssize_t sent =
                sendto(nd.sock, &p, sizeof p, MSG_DONTWAIT, (struct sockaddr *)&a, sizeof a);
            (void)sent; /* a lost heartbeat is made up for by the next */
        }
    }
}

bool rt_nodes_heard(int node, int64_t *heard_us, int *rank, rt_node_beat *last)
{
    if (!atomic_load(&nd.ready) || !nd.table || node == nd.self)
        return false;
    heard *h = &nd.table[node];
    for (int tries = 0; tries < 100; tries++) {
        uint32_t a = atomic_load(&h->seq);
        *heard_us = atomic_load(&h->heard_us);
        *rank = h->rank;
        *last = h->beat;
        if (!(a & 1) && a == atomic_load(&h->seq))
            break;
    }
    last->op[sizeof last->op - 1] = 0;
    last->wait[sizeof last->wait - 1] = 0;
    if (!*heard_us) { /* nothing yet: silent since start-up ended here */
        *heard_us = nd.start_us;
        *rank = -1;
    }
    return true;
}

void rt_nodes_stop(void)
{
    atomic_store(&nd.ready, false);
    if (nd.sock >= 0)
        close(nd.sock);
    nd.sock = -1;
    if (nd.have_win)
        MPI_Win_free(&nd.win);
    nd.have_win = false;
    nd.table = NULL;
    for (int n = 0; nd.ranks && n < nd.nodes; n++)
        free(nd.ranks[n]);
    free(nd.ranks);
    free(nd.first);
    free(nd.count);
    free(nd.info);
    free(nd.node_of);
    nd.ranks = NULL;
    nd.first = nd.count = nd.node_of = NULL;
    nd.info = NULL;
    nd.nodes = 0;
}

/* ---- the launch against the plan ------------------------------------------------------ */

/* "ehost0: ranks 0-1; ehost1: ranks 2-3" for up to 8 hosts. */
static void hosts_text(char *out, size_t cap)
{
    size_t n = 0;
    out[0] = 0;
    for (int i = 0; i < nd.nodes && n + 200 < cap; i++) {
        if (i == 8) {
            snprintf(out + n, cap - n, "; ... (%d hosts)", nd.nodes);
            return;
        }
        char ranks[160];
        rt_nodes_ranks(i, ranks, sizeof ranks);
        n += (size_t)snprintf(out + n, cap - n, "%s%s: rank%s %s", i ? "; " : "", rt_nodes_host(i),
                              nd.count[i] == 1 ? "" : "s", ranks);
    }
}

bool rt_nodes_launch_ok(int gpus_per_node)
{
    const int world = rt_opts_g.world_size, k = gpus_per_node;
    if (k < 1 || world < 2 || !atomic_load(&nd.ready))
        return true;
    /* The plan's node of rank r is r / k. */
    char why[400] = "";
    for (int r = 0; r < world && !why[0]; r++) {
        int first = r / k * k;
        if (nd.node_of[r] != nd.node_of[first])
            snprintf(why, sizeof why,
                     "ranks %d and %d of one planned node run on two hosts (%s, %s)", first, r,
                     nd.info[first].host, nd.info[r].host);
    }
    for (int i = 0; i < nd.nodes && !why[0]; i++) {
        const int *rs = nd.ranks[i];
        for (int j = 1; j < nd.count[i] && !why[0]; j++)
            if (rs[j] / k != rs[0] / k)
                snprintf(why, sizeof why, "ranks %d and %d of two planned nodes share host %s",
                         rs[0], rs[j], rt_nodes_host(i));
    }
    if (!why[0])
        return true;
    if (rt_opts_g.rank == 0) {
        const int planned = (world + k - 1) / k;
        char hosts[1200], msg[2400];
        hosts_text(hosts, sizeof hosts);
        int n = snprintf(
            msg, sizeof msg,
            "burstrt: %s: the launch does not match the plan: the plan's cluster has %d node%s "
            "of %d rank%s, in rank order (ranks 0-%d on the first node), but the ranks run on "
            "%d host%s (%s), so %s; launch %d rank%s per host on %d hosts (mpirun -np %d "
            "--map-by ppr:%d:node, or srun --nodes=%d --ntasks-per-node=%d)%s\n",
            rt_opts_g.allow_mismatched_launch ? "warning" : "error", planned,
            planned == 1 ? "" : "s", k, k == 1 ? "" : "s", k - 1, nd.nodes,
            nd.nodes == 1 ? "" : "s", hosts, why, k, k == 1 ? "" : "s", planned, world, k, planned,
            k,
            rt_opts_g.allow_mismatched_launch
                ? "; running anyway (--allow-mismatched-launch)"
                : ", or pass --allow-mismatched-launch to run anyway");
        if (n > 0) {
            ssize_t w =
                write(STDERR_FILENO, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
            (void)w;
        }
    }
    return rt_opts_g.allow_mismatched_launch;
}
