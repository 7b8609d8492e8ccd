// Pipeline-parallel inference over loopback (docs/DISTRIBUTED.md): ds4 --role coordinator with
// one or two ds4 --role worker processes gives logits bit-identical to one process (prefill in
// several chunkings and decode positions, the output head on a worker or on the coordinator)
// and the same greedy text; a wrong or one-sided --dist-key, overlapping or missing layer
// ranges and another model fail with clear messages on both sides; a killed worker makes the
// coordinator fail with "route incomplete" within a bound; pipelined prefill gives the same ids;
// 16- and 8-bit hidden states stay close;
// ds4-bench as the coordinator probes
// the same greedy ids; session states save and load across the route. In-process, the
// PipelineModel keeps
// the workers consistent through rewind, clear and a worker restart (replay).
//
// Every process runs with a time limit and is killed at the end; ports are picked free.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "dist/connection.h"
#include "model/model.h"
#include "model/session.h"
#include "pipeline/pipeline_model.h"
#include "support/child_process.h"
#include "support/tiny_model.h"
#include "support/tool_run.h"

namespace ds4 {
namespace {

using namespace std::chrono_literals;

using test::contains;
using test::eventually;
using test::Proc;
using test::slurp;

uint16_t free_port() {
    dist::Listener l("127.0.0.1", 0);
    return l.port();
}

class DistPipeline : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        model_ = test::generate_model(*dir_, "tiny.gguf", {"--preset", "tiny", "--seed", "5"});
        // Another model: other metadata (the identity a worker is checked by is the metadata hash).
        other_ = test::generate_model(*dir_, "other.gguf", {"--preset", "tiny", "--seed", "6", "--ctx", "8192"});
        ids_ = dir_->file("ids.txt");
        test::write_token_ids(ids_, test::random_token_ids(100, 512, 11));
        key_a_ = dir_->file("key_a");
        key_b_ = dir_->file("key_b");
        std::ofstream(key_a_) << "0123456789abcdef0123456789abcdef\n";
        std::ofstream(key_b_) << "fedcba9876543210fedcba9876543210\n";
    }
    static void TearDownTestSuite() { delete dir_; }

    std::string file(const std::string& name) const { return dir_->file(name); }

    std::unique_ptr<Proc> worker(const std::string& name, const std::string& layers, uint16_t coord,
                                 std::vector<std::string> extra = {}, const std::string& model = "") {
        std::vector<std::string> a = {test::binary("ds4"), "-m", model.empty() ? model_ : model, "-t", "1",
                                      "--role", "worker", "--layers", layers, "--coordinator", "127.0.0.1",
                                      std::to_string(coord), "--listen", "127.0.0.1", "0"};
        a.insert(a.end(), extra.begin(), extra.end());
        return std::make_unique<Proc>(a, file(name + ".out"), file(name + ".err"));
    }
    std::unique_ptr<Proc> coordinator(const std::string& name, const std::string& layers, uint16_t port,
                                      std::vector<std::string> extra) {
        std::vector<std::string> a = {test::binary("ds4"), "-m", model_, "-t", "1", "--role", "coordinator",
                                      "--layers", layers, "--listen", "127.0.0.1", std::to_string(port),
                                      "--dist-route-timeout", "30"};
        a.insert(a.end(), extra.begin(), extra.end());
        return std::make_unique<Proc>(a, file(name + ".out"), file(name + ".err"));
    }
    // An in-process coordinator's options: layers, listening on 127.0.0.1:port.
    static pipeline::DistOptions coordinator_options(const std::string& layers, uint16_t port) {
        pipeline::DistOptions d;
        d.role = pipeline::Role::coordinator;
        d.layers = layers;
        d.listen_host = "127.0.0.1";
        d.listen_port = port;
        d.route_timeout_s = 30;
        return d;
    }
    // The single-process reference: logits of every position and 8 greedy ids after them.
    std::string reference(const std::string& name, const std::string& prefill_chunk) {
        return test::one_process_reference(test::binary("ds4"), model_, ids_, file(name), prefill_chunk);
    }
    // Runs the coordinator over ids_ and checks its dump and greedy ids against the reference.
    void expect_same_as_one_process(const std::vector<std::string>& worker_layers, const std::string& coord_layers,
                                    const std::string& prefill_chunk, const std::string& dist_chunk,
                                    const std::vector<std::string>& extra = {}) {
        const std::string ref = reference("ref" + prefill_chunk, prefill_chunk);
        const uint16_t port = free_port();
        std::vector<std::unique_ptr<Proc>> ws;
        for (size_t i = 0; i < worker_layers.size(); ++i)
            ws.push_back(worker("w" + std::to_string(i), worker_layers[i], port, extra));
        std::vector<std::string> args = {"--token-ids", ids_, "--dump-logits-f32", file("got.f32"), "-n", "8",
                                         "--prefill-chunk", prefill_chunk, "--dist-prefill-chunk", dist_chunk};
        args.insert(args.end(), extra.begin(), extra.end());
        auto c = coordinator("coord", coord_layers, port, args);
        ASSERT_EQ(c->wait(60), 0) << c->err() << ws[0]->err();
        EXPECT_TRUE(contains(c->err(), "route complete")) << c->err();
        EXPECT_EQ(c->out(), ref);
        const std::string want = slurp(file("ref" + prefill_chunk + ".f32")), got = slurp(file("got.f32"));
        EXPECT_EQ(want.size(), size_t(100) * 512 * 4);
        EXPECT_TRUE(want == got) << "logits differ from the single process";
        for (auto& w : ws) EXPECT_TRUE(w->running()) << w->err();
    }

    void rewind_clear_restart(int64_t dist_chunk);

    static inline test::TempDir* dir_ = nullptr;
    static inline std::string model_, other_, ids_, key_a_, key_b_;
};

TEST_F(DistPipeline, TwoProcessesEqualOneBitForBit) {
    expect_same_as_one_process({"3:output"}, "0:2", "16", "0");
    expect_same_as_one_process({"3:output"}, "0:2", "512", "7");
}

TEST_F(DistPipeline, ThreeProcessesEqualOneBitForBit) {
    // Decode positions as well: prefill chunk 1 evaluates token by token.
    expect_same_as_one_process({"2:3", "4:output"}, "0:1", "1", "0");
}

// SSD streaming in every process of the route (each streams its own layers' experts through a
// two-slot cache): the same logits as one resident process.
TEST_F(DistPipeline, StreamingExpertsOnEveryHopEqualOneProcess) {
    const std::vector<std::string> streaming = {"--ssd-streaming", "--ssd-streaming-cache-experts", "2"};
    expect_same_as_one_process({"2:3", "4:output"}, "0:1", "16", "5", streaming);
    EXPECT_TRUE(contains(slurp(file("w0.err")), "ssd streaming: expert cache")) << slurp(file("w0.err"));
    EXPECT_TRUE(contains(slurp(file("coord.err")), "ssd streaming: expert cache")) << slurp(file("coord.err"));
}

TEST_F(DistPipeline, OutputHeadOnTheCoordinatorEqualsOneProcess) {
    expect_same_as_one_process({"2:3", "4:5"}, "0:1", "32", "5");
}

// Prefill pipelining: a 100-token prompt in WORKs of 9 tokens, ACK-only chunks in flight while
// the coordinator runs the next one, gives the greedy ids of one process.
TEST_F(DistPipeline, PipelinedPrefillGivesTheSameGreedyIds) {
    const std::string ref = reference("ref512", "512");
    for (const std::string window : {"0", "2"}) {
        const uint16_t port = free_port();
        auto w1 = worker("w1", "2:3", port);
        auto w2 = worker("w2", "4:output", port);
        auto c = coordinator("c", "0:1", port,
                             {"--token-ids", ids_, "-n", "8", "--prefill-chunk", "100", "--dist-prefill-chunk", "9",
                              "--dist-prefill-window", window, "--debug"});
        ASSERT_EQ(c->wait(60), 0) << c->err();
        EXPECT_EQ(c->out(), ref);
        // Default window: workers + 2 = 4 chunks in flight; window 2: never more than 2.
        EXPECT_EQ(contains(c->err(), "ack-only (4 in flight)"), window == "0") << c->err();
        EXPECT_TRUE(contains(c->err(), "ack-only (2 in flight)")) << c->err();
        EXPECT_FALSE(contains(c->err(), "(5 in flight)")) << c->err();
    }
}

// 16- and 8-bit hidden states: the logits move (the conversion happened), by little for f16
// and more for FP8, and the worker sees the narrower bytes.
TEST_F(DistPipeline, NarrowActivationsStayCloseToOneProcess) {
    reference("ref512", "512");
    const std::string ref_bytes = slurp(file("ref512.f32"));
    std::vector<float> ref(ref_bytes.size() / 4);
    std::memcpy(ref.data(), ref_bytes.data(), ref_bytes.size());
    double sd = 0;
    for (float v : ref) sd += double(v) * v;
    sd = std::sqrt(sd / double(ref.size()));
    double mean_err[2] = {0, 0};
    for (int k = 0; k < 2; ++k) {
        const std::string bits = k == 0 ? "16" : "8";
        const uint16_t port = free_port();
        auto w = worker("w" + bits, "2:3", port);
        auto w2 = worker("w2" + bits, "4:output", port);
        auto c = coordinator("c" + bits, "0:1", port,
                             {"--token-ids", ids_, "--dump-logits-f32", file("n.f32"), "--dist-activation-bits", bits,
                              "--debug"});
        ASSERT_EQ(c->wait(60), 0) << c->err();
        // One hop's input: 100 tokens x hidden_size (4 x 256) values at `bits`.
        EXPECT_TRUE(contains(c->err(), fmt::format("in {} B", 100 * 1024 * std::stoi(bits) / 8))) << c->err();
        const std::string got_bytes = slurp(file("n.f32"));
        ASSERT_EQ(got_bytes.size(), ref_bytes.size());
        std::vector<float> got(ref.size());
        std::memcpy(got.data(), got_bytes.data(), got_bytes.size());
        double max_err = 0;
        for (size_t i = 0; i < ref.size(); ++i) {
            const double d = std::fabs(double(got[i]) - ref[i]);
            max_err = std::max(max_err, d);
            mean_err[k] += d;
        }
        mean_err[k] /= double(ref.size()) * sd;
        // Mean error only: a perturbed hidden state may flip a discrete routing choice (top-k
        // experts) at a few positions, which moves those logits a lot.
        EXPECT_GT(max_err, 0.0) << bits;
        EXPECT_LT(mean_err[k], k == 0 ? 0.05 : 0.3) << bits;
        std::printf("%s-bit hidden states: mean |logit error| %.4f, max %.4f (x logit std)\n", bits.c_str(),
                    mean_err[k], max_err / sd);
    }
    EXPECT_LT(mean_err[0], mean_err[1]);
}

TEST_F(DistPipeline, KeysAuthenticateAndAWrongKeyFailsOnBothSides) {
    const uint16_t port = free_port();
    {
        auto w = worker("wk", "3:output", port, {"--dist-key", key_a_});
        auto c = coordinator("ck", "0:2", port, {"--dist-key", key_a_, "--token-ids", ids_, "-n", "2"});
        EXPECT_EQ(c->wait(60), 0) << c->err() << w->err();
    }
    auto w = worker("wbad", "3:output", port, {"--dist-key", key_b_});
    auto c = coordinator("cbad", "0:2", port,
                         {"--dist-key", key_a_, "--dist-route-timeout", "3", "--token-ids", ids_, "-n", "2"});
    EXPECT_NE(w->wait(30), 0);
    EXPECT_TRUE(contains(w->err(), "the key files differ")) << w->err();
    EXPECT_NE(c->wait(30), 0);
    EXPECT_TRUE(contains(c->err(), "--dist-key differs")) << c->err();
    EXPECT_TRUE(contains(c->err(), "route incomplete after")) << c->err();
}

TEST_F(DistPipeline, AKeyOnOneSideOnlyFailsClearly) {
    const uint16_t port = free_port();
    auto w = worker("w1", "3:output", port, {"--dist-key", key_a_});
    auto c = coordinator("c1", "0:2", port, {"--dist-route-timeout", "3", "--token-ids", ids_, "-n", "2"});
    EXPECT_NE(w->wait(30), 0);
    EXPECT_TRUE(contains(w->err(), "runs without --dist-key")) << w->err();
    EXPECT_NE(c->wait(30), 0);
    EXPECT_TRUE(contains(c->err(), "this side has no --dist-key")) << c->err();
}

TEST_F(DistPipeline, OverlappingMissingAndForeignRangesFailClearly) {
    const uint16_t port = free_port();
    auto c = coordinator("c", "0:2", port, {"--dist-route-timeout", "4", "--token-ids", ids_, "-n", "2"});
    auto good = worker("good", "4:output", port);
    ASSERT_TRUE(eventually([&] { return contains(c->err(), "registered layers 4:output"); }, 20)) << c->err();
    auto overlap = worker("overlap", "3:4", port);
    EXPECT_NE(overlap->wait(30), 0);
    EXPECT_TRUE(contains(overlap->err(), "refused the registration")) << overlap->err();
    EXPECT_TRUE(contains(overlap->err(), "overlap layers 4:output")) << overlap->err();
    auto foreign = worker("foreign", "3:3", port, {}, other_);
    EXPECT_NE(foreign->wait(30), 0);
    EXPECT_TRUE(contains(foreign->err(), "another model")) << foreign->err();
    EXPECT_NE(c->wait(30), 0);
    const std::string log = c->err();
    EXPECT_TRUE(contains(log, "refused the worker")) << log;
    EXPECT_TRUE(contains(log, "route incomplete after 4 s: no worker holds layers 3:3")) << log;
    EXPECT_TRUE(good->running());
}

TEST_F(DistPipeline, AKilledWorkerFailsTheCoordinatorWithinABound) {
    const uint16_t port = free_port();
    auto w = worker("w", "3:output", port);
    // Long enough to be cut short: up to 3900 greedy ids, one by one.
    auto c = coordinator("c", "0:2", port, {"--token-ids", ids_, "-n", "3900"});
    ASSERT_TRUE(eventually([&] { return c->out().size() > 20; }, 30)) << c->err();
    w->kill(SIGKILL);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(c->wait(20), 1);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 15s);
    EXPECT_TRUE(contains(c->err(), "route incomplete")) << c->err();
}

// The coordinator in this process: rewinds, clears and a restarted worker keep every result
// equal to one process's.
TEST_F(DistPipeline, RewindClearAndARestartedWorkerStayConsistent) {
    // One WORK per call, and pipelined WORKs of 7 tokens (the replay too).
    for (const int64_t dist_chunk : {0, 7}) rewind_clear_restart(dist_chunk);
}

void DistPipeline::rewind_clear_restart(int64_t dist_chunk) {
    SCOPED_TRACE(dist_chunk);
    const auto ids = test::random_token_ids(60, 512, 12);
    auto whole = model::open(model_, {.threads = 1});
    std::vector<float> ref40, ref60;
    {
        model::Session s(*whole, {.ctx = 256, .prefill_chunk = 20});
        s.eval(std::vector<int32_t>(ids.begin(), ids.begin() + 40), &ref40);
        s.eval(std::vector<int32_t>(ids.begin() + 40, ids.end()), &ref60);
    }
    const uint16_t port = free_port();
    auto w = worker("w", "3:output", port, {"-c", "256"});
    pipeline::DistOptions d = coordinator_options("0:2", port);
    d.prefill_chunk = dist_chunk;
    auto pm = pipeline::open_model(model_, {.threads = 1}, d);
    model::Session s(*pm, {.ctx = 256, .prefill_chunk = 20});
    std::vector<float> got;
    const std::vector<int32_t> first(ids.begin(), ids.begin() + 40), rest(ids.begin() + 40, ids.end());
    s.eval(first, &got);
    EXPECT_EQ(got, ref40);
    s.eval(rest, &got);
    EXPECT_EQ(got, ref60);
    // Back to 40 (the worker rewinds too) and forward again.
    s.truncate(40);
    s.eval(rest, &got);
    EXPECT_EQ(got, ref60);
    // Start over.
    s.reset();
    s.eval(first, &got);
    EXPECT_EQ(got, ref40);
    // The worker dies: the call fails, no hang; a new worker registers; the coordinator replays.
    w->kill(SIGKILL);
    try {
        s.eval(rest, &got);
        ADD_FAILURE() << "evaluated without a worker";
    } catch (const Error& e) {
        EXPECT_TRUE(contains(e.what(), "route incomplete")) << e.what();
    }
    // Until the coordinator has read the dead worker's control connection end, its route
    // still names that worker (and wait_for_route below would return it at once).
    auto& coord = static_cast<pipeline::PipelineModel&>(*pm).coordinator();
    ASSERT_TRUE(eventually(
        [&] {
            try {
                coord.route();
                return false;
            } catch (const Error&) {
                return true;
            }
        },
        30));
    auto w2 = worker("w2", "3:output", port, {"-c", "256"});
    coord.wait_for_route(30);
    s.truncate(40);  // what the failed call left is dropped
    s.eval(rest, &got);
    EXPECT_EQ(got, ref60);
}

// The draft seam's outputs over a pipeline (they replace its refusal, issue 31): hidden states
// and layer captures asked of PipelineModel::eval come back equal to one process's bit for bit
// (32-bit activations): the coordinator's own layers' captures from here, the workers' and the
// final hidden state in the RESULTs' draft rows. Pipelined WORKs (some before hidden_from), a
// capture on every process (a relaying worker puts its own in front), the head on a worker and
// on the coordinator, hidden states of all rows and of the last.
TEST_F(DistPipeline, DraftOutputsComeBackBitForBit) {
    const auto ids = test::random_token_ids(30, 512, 13);
    const std::vector<uint32_t> capture = {1, 3, 5};
    using model::Logits;
    auto run = [&](model::Model& m) {
        auto seq = m.new_sequence({.ctx = 256});
        const int64_t H = m.info().hidden_size, V = m.info().n_vocab;
        std::vector<std::vector<float>> out;
        auto call = [&](size_t a, size_t b, Logits want, Logits hw, int64_t from) {
            const std::span<const int32_t> t(ids.data() + a, b - a);
            const int64_t n = int64_t(t.size());
            std::vector<float> l(size_t((want == Logits::All ? n : 1) * V)),
                h(size_t((hw == Logits::All ? n - from : 1) * H)), c(capture.size() * size_t((n - from) * H));
            const model::BatchItem it{seq.get(), t, want, l.data(), hw, h.data(), capture, c.data(), from};
            m.eval(model::Batch(&it, 1));
            out.insert(out.end(), {l, h, c});
        };
        call(0, 20, Logits::Last, Logits::All, 9);   // a prompt: the drafter reads its tail
        call(20, 24, Logits::All, Logits::All, 0);   // a verification step
        call(24, 30, Logits::Last, Logits::Last, 2);
        EXPECT_EQ(seq->pos(), 30);
        return out;
    };
    auto whole = model::open(model_, {.threads = 1});
    const auto want = run(*whole);
    struct Case {
        std::string coord;
        std::vector<std::string> workers;
        int64_t dist_chunk;
    };
    for (const Case& c : {Case{"0:2", {"3:output"}, 7}, Case{"0:1", {"2:3", "4:5"}, 0}}) {
        SCOPED_TRACE(c.coord);
        const uint16_t port = free_port();
        std::vector<std::unique_ptr<Proc>> ws;
        for (size_t i = 0; i < c.workers.size(); ++i)
            ws.push_back(worker("dw" + std::to_string(i), c.workers[i], port, {"-c", "256"}));
        pipeline::DistOptions d = coordinator_options(c.coord, port);
        d.prefill_chunk = c.dist_chunk;
        auto pm = pipeline::open_model(model_, {.threads = 1}, d);
        const auto got = run(*pm);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(got[i] == want[i]) << "output " << i << " differs";
        for (auto& w : ws) EXPECT_TRUE(w->running()) << w->err();
    }
}

// Batched calls over a pipeline (issue 33): 2, 3 and 4 sequences in one PipelineModel::eval
// travel as one WORK per hop (the coordinator's --debug line says so) and give every sequence
// the logits it gets alone in one process, bit for bit: prompts of different lengths (the last
// row's logits and every row's), one-token decode steps, a rewound sequence, a clone the
// workers do not know (it runs alone, replaying, the others batched), and sessions the worker
// dropped (a state mismatch: that batch runs its items one by one, each replaying). The head on
// a worker, and on the coordinator with --dist-prefill-chunk 4 (the longer prompts then go one
// by one, the decode steps batched).
TEST_F(DistPipeline, BatchedCallsEqualOneProcessBitForBit) {
    using model::Logits;
    const auto ids = test::random_token_ids(160, 512, 14);
    struct Row {
        size_t seq;
        std::vector<int32_t> tokens;
        Logits want;
    };
    // Every call of every step, with its logits; `together`: one eval per step, else per row.
    auto run = [&](model::Model& m, size_t nseq, bool together) {
        const int64_t V = m.info().n_vocab;
        std::vector<std::unique_ptr<model::Sequence>> seqs;
        for (size_t i = 0; i < nseq; ++i) seqs.push_back(m.new_sequence({.ctx = 256}));
        size_t cursor = 0;
        auto take = [&](size_t n) {
            std::vector<int32_t> t(ids.begin() + ptrdiff_t(cursor), ids.begin() + ptrdiff_t(cursor + n));
            cursor += n;
            return t;
        };
        std::vector<std::vector<float>> out;
        auto step = [&](const std::vector<Row>& rows) {
            std::vector<std::vector<float>> logits;
            std::vector<model::BatchItem> items;
            for (const Row& r : rows) {
                logits.emplace_back(size_t((r.want == Logits::All ? int64_t(r.tokens.size()) : 1) * V));
                items.push_back({seqs[r.seq].get(), r.tokens, r.want, logits.back().data()});
            }
            if (together) m.eval(model::Batch(items));
            else
                for (const auto& it : items) m.eval(model::Batch(&it, 1));
            out.insert(out.end(), logits.begin(), logits.end());
        };
        std::vector<Row> rows;
        for (size_t i = 0; i < nseq; ++i) rows.push_back({i, take(3 + 2 * i), i == 1 ? Logits::All : Logits::Last});
        step(rows);
        for (int d = 0; d < 3; ++d) {
            rows.clear();
            for (size_t i = 0; i < nseq; ++i) rows.push_back({i, take(1), Logits::Last});
            step(rows);
        }
        seqs[0]->rewind(seqs[0]->pos() - 2);
        rows.clear();
        for (size_t i = 0; i < nseq; ++i) rows.push_back({i, take(i == 0 ? 2 : 1), i == 0 ? Logits::All : Logits::Last});
        step(rows);
        seqs[nseq - 1] = seqs[0]->clone();
        rows.clear();
        for (size_t i = 0; i < nseq; ++i) rows.push_back({i, take(1), Logits::Last});
        step(rows);
        // Eight new sequences push the others out of the worker's 8 sessions: the next batched
        // call meets a state mismatch and runs its items one by one, each replaying.
        const size_t first_new = seqs.size();
        for (size_t i = 0; i < 8; ++i) seqs.push_back(m.new_sequence({.ctx = 256}));
        rows.clear();
        for (size_t i = 0; i < 8; ++i) rows.push_back({first_new + i, take(2), Logits::Last});
        step(rows);
        rows.clear();
        for (size_t i = 0; i < nseq; ++i) rows.push_back({i, take(1), Logits::Last});
        step(rows);
        return out;
    };
    auto whole = model::open(model_, {.threads = 1});
    struct Case {
        std::string coord;
        std::vector<std::string> workers;
        int64_t dist_chunk;
    };
    for (const Case& c : {Case{"0:2", {"3:output"}, 0}, Case{"0:1", {"2:3", "4:5"}, 4}}) {
        SCOPED_TRACE(c.coord);
        const uint16_t port = free_port();
        std::vector<std::unique_ptr<Proc>> ws;
        for (size_t i = 0; i < c.workers.size(); ++i)
            ws.push_back(worker("bw" + std::to_string(i), c.workers[i], port, {"-c", "256"}));
        pipeline::DistOptions d = coordinator_options(c.coord, port);
        d.prefill_chunk = c.dist_chunk;
        d.debug = true;
        auto pm = pipeline::open_model(model_, {.threads = 1}, d);
        for (size_t nseq : {2, 3, 4}) {
            SCOPED_TRACE(nseq);
            const auto want = run(*whole, nseq, false);
            testing::internal::CaptureStderr();
            const auto got = run(*pm, nseq, true);
            const std::string err = testing::internal::GetCapturedStderr();
            ASSERT_EQ(got.size(), want.size());
            for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(got[i] == want[i]) << "call " << i << " differs";
            const std::string line = fmt::format("batch of {} sequences", nseq);
            size_t batches = 0;
            for (size_t at = err.find(line); at != std::string::npos; at = err.find(line, at + 1)) ++batches;
            // The decode steps and the rewound step at least; the prompts too without chunking.
            EXPECT_GE(batches, c.dist_chunk == 0 ? 5u : 4u) << err;
            if (nseq > 2) {
                EXPECT_TRUE(contains(err, fmt::format("batch of {} sequences", nseq - 1))) << err;
            }
            EXPECT_TRUE(contains(err, "batch of 8 sequences")) << err;
            EXPECT_TRUE(contains(err, "running its items alone")) << err;
        }
        for (auto& w : ws) EXPECT_TRUE(w->running()) << w->err();
    }
}

// Session states across the route (SNAPSHOT frames): the merged state of coordinator 0:1 and
// workers 2:3, 4:output is byte for byte the state one process saves, and loading it (or one
// process's) into a fresh pipeline sequence continues with the same logits.
TEST_F(DistPipeline, SessionStatesSaveAndLoadAcrossTheRoute) {
    const auto ids = test::random_token_ids(60, 512, 14);
    const std::vector<int32_t> first(ids.begin(), ids.begin() + 40), rest(ids.begin() + 40, ids.end());
    auto whole = model::open(model_, {.threads = 1});
    std::vector<float> ref60, logits40;
    std::vector<uint8_t> one_state;
    {
        model::Session s(*whole, {.ctx = 256, .prefill_chunk = 40});
        s.eval(first, &logits40);
        one_state = whole->save_state(s.sequence(), logits40);
        s.eval(rest, &ref60);
    }
    const uint16_t port = free_port();
    auto w1 = worker("w1", "2:3", port, {"-c", "256"});
    auto w2 = worker("w2", "4:output", port, {"-c", "256"});
    pipeline::DistOptions d = coordinator_options("0:1", port);
    d.debug = true;
    auto pm = pipeline::open_model(model_, {.threads = 1}, d);
    std::vector<float> got;
    {
        model::Session s(*pm, {.ctx = 256, .prefill_chunk = 40});
        s.eval(first, &got);
        EXPECT_EQ(got, logits40);
        const auto state = pm->save_state(s.sequence(), got);
        EXPECT_TRUE(state == one_state) << state.size() << " vs " << one_state.size() << " bytes";
    }
    for (int k = 0; k < 2; ++k) {
        model::Session s(*pm, {.ctx = 256, .prefill_chunk = 40});
        std::vector<float> loaded;
        testing::internal::CaptureStderr();
        pm->load_state(one_state, s.sequence(), &loaded);
        EXPECT_EQ(loaded, logits40);
        EXPECT_EQ(s.pos(), 40);
        s.eval(rest, &got);
        const std::string log = testing::internal::GetCapturedStderr();
        EXPECT_EQ(got, ref60) << k;
        // The workers hold the loaded state: no replay (which --debug would report).
        EXPECT_FALSE(contains(log, "replaying")) << log;
        EXPECT_TRUE(contains(log, "ack-only") || contains(log, "round trip")) << log;
    }
}

// ds4-bench as the coordinator: its snapshot / restore of the KV state at every frontier (clone,
// assign: the worker rewinds) gives the probes' greedy ids of one process.
TEST_F(DistPipeline, BenchProbesEqualOneProcess) {
    const std::string ids = file("ids600.txt");
    test::write_token_ids(ids, test::random_token_ids(300, 512, 13));
    const std::vector<std::string> common = {"-m", model_, "-t", "1", "--token-ids", ids, "--ctx-start", "64",
                                             "--ctx-max", "256", "--step-incr", "64", "--gen-tokens", "6"};
    std::vector<std::string> one = {test::binary("ds4-bench")};
    one.insert(one.end(), common.begin(), common.end());
    one.insert(one.end(), {"--dump-probe-ids", file("probes1.txt")});
    Proc ref(one, file("b1.out"), file("b1.err"));
    ASSERT_EQ(ref.wait(60), 0) << ref.err();
    const uint16_t port = free_port();
    auto w = worker("w", "3:output", port);
    std::vector<std::string> co = {test::binary("ds4-bench")};
    co.insert(co.end(), common.begin(), common.end());
    co.insert(co.end(), {"--dump-probe-ids", file("probes2.txt"), "--role", "coordinator", "--layers", "0:2",
                         "--listen", "127.0.0.1", std::to_string(port)});
    Proc c(co, file("b2.out"), file("b2.err"));
    ASSERT_EQ(c.wait(60), 0) << c.err();
    const std::string want = slurp(file("probes1.txt"));
    EXPECT_FALSE(want.empty());
    EXPECT_EQ(slurp(file("probes2.txt")), want);
}

// Greedy text through the chat front end, with the real vocabulary and template.
TEST(DistPipelineText, GreedyGenerationEqualsOneProcess) {
    test::TempDir dir;
    const std::string m = dir.file("tiny_rv.gguf");
    ASSERT_EQ(test::write_tiny_model(m, test::kTinyQ8Io).exit_code, 0);
    const std::vector<std::string> gen = {"-p", "Hello there", "--nothink", "--temp", "0", "-n", "12"};
    std::vector<std::string> one = {test::binary("ds4"), "-m", m, "-t", "1"};
    one.insert(one.end(), gen.begin(), gen.end());
    Proc ref(one, dir.file("ref.out"), dir.file("ref.err"));
    ASSERT_EQ(ref.wait(60), 0) << ref.err();
    const uint16_t port = free_port();
    Proc w({test::binary("ds4"), "-m", m, "-t", "1", "--role", "worker", "--layers", "3:output", "--coordinator",
            "127.0.0.1", std::to_string(port), "--listen", "127.0.0.1", "0"},
           dir.file("w.out"), dir.file("w.err"));
    std::vector<std::string> co = {test::binary("ds4"), "-m", m, "-t", "1", "--role", "coordinator", "--layers",
                                   "0:2", "--listen", "127.0.0.1", std::to_string(port), "--dist-route-timeout", "30"};
    co.insert(co.end(), gen.begin(), gen.end());
    Proc c(co, dir.file("c.out"), dir.file("c.err"));
    ASSERT_EQ(c.wait(60), 0) << c.err() << w.err();
    EXPECT_FALSE(ref.out().empty());
    EXPECT_EQ(c.out(), ref.out());
}

// --dist-replay-check over a route: the prompt, a reset of every hop, the prompt again: the two
// next-token rows are equal (a worker that kept stale KV after the reset would differ).
TEST(DistPipelineText, ReplayCheckFindsTheReplayEqual) {
    test::TempDir dir;
    const std::string m = dir.file("tiny_rv.gguf");
    ASSERT_EQ(test::write_tiny_model(m, test::kTinyQ8Io).exit_code, 0);
    const uint16_t port = free_port();
    Proc w({test::binary("ds4"), "-m", m, "-t", "1", "--role", "worker", "--layers", "3:output", "--coordinator",
            "127.0.0.1", std::to_string(port), "--listen", "127.0.0.1", "0"},
           dir.file("w.out"), dir.file("w.err"));
    Proc c({test::binary("ds4"), "-m", m, "-t", "1", "--role", "coordinator", "--layers", "0:2", "--listen",
            "127.0.0.1", std::to_string(port), "--dist-route-timeout", "30", "-p", "Hello there", "--nothink",
            "--dist-replay-check"},
           dir.file("c.out"), dir.file("c.err"));
    ASSERT_EQ(c.wait(60), 0) << c.out() << c.err() << w.err();
    EXPECT_NE(c.out().find("over the pipeline; max |first - replay| = 0;"), std::string::npos) << c.out();
}

// A coordinator restarted with a saved KV file (issue 24): the chat's /save on coordinator 0:1
// with workers 2:3 and 4:output writes one whole-model state; the coordinator exits, a new one
// registers the same (still running) workers, /loads the file and continues. Both replies equal
// one process's doing the same (/save, exit, /load in a new process), the turn reuses the loaded
// tokens, and no worker needed a replay (the load pushed each its part). (A reply cut by -n
// leaves its last sampled token out of the saved conversation, so the continuation is compared
// with a one-process save and load, not with one process's uninterrupted chat.)
TEST(DistPipelineText, ARestartedCoordinatorContinuesFromASavedKvFile) {
    test::TempDir dir;
    const std::string m = dir.file("tiny_rv.gguf");
    ASSERT_EQ(test::write_tiny_model(m, test::kTinyQ8Io).exit_code, 0);
    auto script = [&](const std::string& name, const std::string& text) {
        std::ofstream(dir.file(name)) << text;
        return dir.file(name);
    };
    const std::vector<std::string> chat = {"-t", "1", "--ctx", "1024", "--temp", "0", "-n", "8", "--nothink"};
    std::vector<std::string> one = {test::binary("ds4"), "-m", m};
    one.insert(one.end(), chat.begin(), chat.end());
    const std::string ref_kv = dir.file("ref.kv");
    Proc ref1(one, dir.file("r1.out"), dir.file("r1.err"), script("r1.in", "Hello there\n/save " + ref_kv + "\n/quit\n"));
    ASSERT_EQ(ref1.wait(60), 0) << ref1.err();
    Proc ref2(one, dir.file("r2.out"), dir.file("r2.err"), script("r2.in", "/load " + ref_kv + "\nAnd then?\n/quit\n"));
    ASSERT_EQ(ref2.wait(60), 0) << ref2.err();

    const uint16_t port = free_port();
    auto worker = [&](const std::string& name, const std::string& layers) {
        return std::make_unique<Proc>(
            std::vector<std::string>{test::binary("ds4"), "-m", m, "-t", "1", "--role", "worker", "--layers",
                                     layers, "--coordinator", "127.0.0.1", std::to_string(port), "--listen",
                                     "127.0.0.1", "0", "--ctx", "1024"},
            dir.file(name + ".out"), dir.file(name + ".err"));
    };
    auto w1 = worker("w1", "2:3");
    auto w2 = worker("w2", "4:output");
    std::vector<std::string> co = {test::binary("ds4"), "-m", m, "--role", "coordinator", "--layers", "0:1",
                                   "--listen", "127.0.0.1", std::to_string(port), "--dist-route-timeout", "30"};
    co.insert(co.end(), chat.begin(), chat.end());
    const std::string saved = dir.file("conv.kv");
    Proc first(co, dir.file("c1.out"), dir.file("c1.err"), script("c1.in", "Hello there\n/save " + saved + "\n/quit\n"));
    ASSERT_EQ(first.wait(60), 0) << first.err() << w1->err() << w2->err();
    ASSERT_TRUE(contains(first.err(), "saved ")) << first.err();
    ASSERT_TRUE(w1->running() && w2->running()) << w1->err() << w2->err();

    co.push_back("--debug");
    Proc second(co, dir.file("c2.out"), dir.file("c2.err"), script("c2.in", "/load " + saved + "\nAnd then?\n/quit\n"));
    ASSERT_EQ(second.wait(60), 0) << second.err() << w1->err() << w2->err();
    const std::string err = second.err();
    EXPECT_TRUE(contains(err, "route complete")) << err;
    EXPECT_TRUE(contains(err, "loaded ")) << err;
    EXPECT_FALSE(contains(err, "replaying")) << err;
    // The first turn's tokens come from the file: the second turn prefills only its own.
    std::smatch pf;
    ASSERT_TRUE(std::regex_search(err, pf, std::regex("this turn prefilled ([0-9]+), reused ([0-9]+)"))) << err;
    EXPECT_GT(std::stol(pf[2]), 10) << err;
    EXPECT_FALSE(ref1.out().empty());
    EXPECT_FALSE(ref2.out().empty());
    EXPECT_EQ(first.out(), ref1.out());
    EXPECT_EQ(second.out(), ref2.out());
    EXPECT_TRUE(w1->running() && w2->running());
}

// Speculative decoding on a pipeline coordinator (issue 31): the drafter runs on the coordinator
// with the hidden states and layer captures the route returns with the logits. --mtp at draft
// depths 2 to 4 and --dspark, prefill chunks 1 and 64, with the head on a worker and on the
// coordinator: the text of plain greedy decoding, and the same drafts accepted as in one process
// (the drafter sees the same rows bit for bit, so it proposes the same tokens).
TEST(DistPipelineText, MtpAndDsparkOnACoordinatorPrintThePlainGreedyText) {
    test::TempDir dir;
    const std::string m = dir.file("tiny_sp.gguf"), mtp = dir.file("mtp.gguf"), dspark = dir.file("dspark.gguf");
    auto gen = test::kTinyQ8Io;
    gen.insert(gen.end(), {"--mtp-out", mtp, "--dspark-out", dspark});
    ASSERT_EQ(test::write_tiny_model(m, gen).exit_code, 0);
    const std::vector<std::string> common = {"-t", "1", "--ctx", "512", "-p", "Tell me about the sea.", "--temp", "0",
                                             "-n", "32", "--nothink"};
    int runs = 0;
    auto ds4 = [&](std::vector<std::string> extra) {
        std::vector<std::string> a = {test::binary("ds4"), "-m", m};
        a.insert(a.end(), common.begin(), common.end());
        a.insert(a.end(), extra.begin(), extra.end());
        const std::string name = "r" + std::to_string(runs++);
        Proc p(a, dir.file(name + ".out"), dir.file(name + ".err"));
        EXPECT_EQ(p.wait(60), 0) << p.err();
        std::smatch d;
        const std::string err = p.err();
        return std::make_pair(p.out(), std::regex_search(err, d, std::regex("drafts: [^\n]*")) ? d.str() : std::string());
    };
    const auto plain = ds4({});
    ASSERT_FALSE(plain.first.empty());
    const std::vector<std::vector<std::string>> cases = {
        {"--mtp", mtp, "--mtp-draft", "2", "--mtp-margin", "0", "--prefill-chunk", "64"},
        {"--mtp", mtp, "--mtp-draft", "4", "--mtp-margin", "0", "--prefill-chunk", "1"},
        {"--mtp", dspark, "--dspark", "--dspark-confidence", "0", "--prefill-chunk", "64"},
    };
    std::vector<std::string> alone;
    for (const auto& c : cases) {
        const auto r = ds4(c);
        EXPECT_EQ(r.first, plain.first);
        alone.push_back(r.second);
    }
    struct Route {
        std::string coord;
        std::vector<std::string> workers;
    };
    for (const Route& route : {Route{"0:1", {"2:3", "4:output"}}, Route{"0:3", {"4:5"}}}) {
        SCOPED_TRACE(route.coord);
        const uint16_t port = free_port();
        std::vector<std::unique_ptr<Proc>> ws;
        for (const std::string& l : route.workers)
            ws.push_back(std::make_unique<Proc>(
                std::vector<std::string>{test::binary("ds4"), "-m", m, "-t", "1", "--role", "worker", "--layers", l,
                                         "--coordinator", "127.0.0.1", std::to_string(port), "--listen", "127.0.0.1",
                                         "0", "--ctx", "512"},
                dir.file("w" + l + ".out"), dir.file("w" + l + ".err")));
        for (size_t i = 0; i < cases.size(); ++i) {
            std::vector<std::string> flags = {"--role", "coordinator", "--layers", route.coord, "--listen", "127.0.0.1",
                                              std::to_string(port), "--dist-route-timeout", "30", "--dist-prefill-chunk",
                                              "7"};
            flags.insert(flags.end(), cases[i].begin(), cases[i].end());
            const auto r = ds4(flags);
            EXPECT_EQ(r.first, plain.first) << cases[i][1];
            EXPECT_EQ(r.second, alone[i]) << cases[i][1];
        }
        for (auto& w : ws) EXPECT_TRUE(w->running()) << w->err();
    }
    // MTP drafts were verified (a random DSpark file's first row rarely agrees with the trunk: it
    // proposes nothing here; tests/model/dspark_test.cpp drafts with a rewritten head).
    EXPECT_TRUE(contains(alone[0], "drafts: ") && contains(alone[1], "drafts: ")) << alone[0] << alone[1];
}

// Ctrl+C drains: SIGINT to an interactive coordinator in the middle of a reply stops the reply
// after the token in flight (its WORK finishes on every hop), so the route's states still match
// the coordinator's transcript: the next turn reuses the whole conversation and no worker needs
// a replay.
TEST(DistPipelineText, CtrlCInAReplyFinishesTheTokenInFlightAndTheNextTurnNeedsNoReplay) {
    test::TempDir dir;
    const std::string m = dir.file("tiny_rv.gguf");
    ASSERT_EQ(test::write_tiny_model(m, test::kTinyQ8Io).exit_code, 0);
    const uint16_t port = free_port();
    auto worker = [&](const std::string& name, const std::string& layers) {
        return std::make_unique<Proc>(
            std::vector<std::string>{test::binary("ds4"), "-m", m, "-t", "1", "--role", "worker", "--layers",
                                     layers, "--coordinator", "127.0.0.1", std::to_string(port), "--listen",
                                     "127.0.0.1", "0", "--ctx", "4096", "--debug"},
            dir.file(name + ".out"), dir.file(name + ".err"));
    };
    auto w1 = worker("w1", "2:3");
    auto w2 = worker("w2", "4:output");
    // A fifo for stdin: the second message is written only after the interrupt.
    const std::string in = dir.file("in.fifo");
    ASSERT_EQ(mkfifo(in.c_str(), 0600), 0);
    Proc co({test::binary("ds4"), "-m", m, "--role", "coordinator", "--layers", "0:1", "--listen", "127.0.0.1",
             std::to_string(port), "--dist-route-timeout", "30", "-t", "1", "--ctx", "4096", "--temp", "0", "-n",
             "3000", "--nothink", "--debug"},
            dir.file("c.out"), dir.file("c.err"), in);
    std::ofstream feed(in);  // opens once the child has opened its end
    feed << "Tell me a long story\n" << std::flush;
    // Interrupt once the reply has started (and is far from its 3000-token limit).
    ASSERT_TRUE(eventually([&] { return co.out().size() > 40; }, 60)) << co.err() << w1->err() << w2->err();
    co.kill(SIGINT);
    ASSERT_TRUE(eventually([&] { return contains(co.err(), "[stopped]"); }, 30)) << co.err();
    // The second turn is stopped the same way (its 3000 tokens would take a while).
    const size_t before = co.out().size();
    feed << "And then?\n" << std::flush;
    ASSERT_TRUE(eventually([&] { return co.out().size() > before + 40; }, 60)) << co.err();
    co.kill(SIGINT);
    auto stops = [&] {
        const std::string e = co.err();
        size_t n = 0;
        for (size_t at = e.find("context: "); at != std::string::npos; at = e.find("context: ", at + 1)) ++n;
        return n;
    };
    ASSERT_TRUE(eventually([&] { return stops() == 2; }, 30)) << co.err();
    feed << "/quit\n" << std::flush;
    feed.close();
    ASSERT_EQ(co.wait(60), 0) << co.err() << w1->err() << w2->err();
    const std::string err = co.err();
    EXPECT_FALSE(contains(err, "replaying")) << err;
    EXPECT_FALSE(contains(err, "route incomplete")) << err;
    // The second turn prefilled only its own tokens: everything before was reused.
    std::smatch pf;
    const std::regex turn("this turn prefilled ([0-9]+), reused ([0-9]+)");
    std::vector<std::pair<long, long>> turns;
    for (auto it = std::sregex_iterator(err.begin(), err.end(), turn); it != std::sregex_iterator(); ++it)
        turns.push_back({std::stol((*it)[1]), std::stol((*it)[2])});
    ASSERT_EQ(turns.size(), 2u) << err;
    EXPECT_GT(turns[1].second, turns[0].first) << err;
    EXPECT_LT(turns[1].first, 30) << err;
    EXPECT_TRUE(w1->running() && w2->running()) << w1->err() << w2->err();
}

}  // namespace
}  // namespace ds4
