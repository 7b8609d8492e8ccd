// Upstream ds4 as a peer on loopback (docs/DISTRIBUTED.md, "Mixed clusters"; issue 38), both
// directions, with a fake upstream process in the test replaying the frames upstream sent
// (tests/data/upstream-frames):
// - our coordinator (a ds4 process) with a fake upstream worker: the worker's HELLO (the
//   captured one, its layers and port set for the tiny model) registers, the probe is answered
//   with upstream's error RESULT, and the WORK that follows uses only upstream's flags and
//   model id, one token per WORK when every row's logits are wanted; upstream's error RESULT
//   for it fails the run with upstream's message.
// - our worker (a ds4 process) with a fake upstream coordinator: its HELLO is what upstream's
//   coordinator requires; WORK on the control connection in upstream's dialect is refused with
//   upstream's error shape when its flags are not upstream's, and otherwise answered with the
//   logits the whole model gives, bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <future>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dist/activation.h"
#include "dist/connection.h"
#include "dist/protocol.h"
#include "model/model.h"
#include "pipeline/pipeline_model.h"
#include "support/child_process.h"
#include "support/tiny_model.h"
#include "support/tool_run.h"

namespace ds4 {
namespace {

using test::contains;
using test::Proc;
using Bytes = std::vector<uint8_t>;

Bytes fixture(const std::string& name) {
    std::ifstream f(std::string(DS4_SOURCE_DIR) + "/tests/data/upstream-frames/" + name, std::ios::binary);
    EXPECT_TRUE(f.good()) << name;
    return Bytes(std::istreambuf_iterator<char>(f), {});
}

void patch(Bytes& b, size_t field, uint32_t v) {
    const size_t at = dist::kHeaderBytes + 4 * field;
    b[at] = uint8_t(v >> 24), b[at + 1] = uint8_t(v >> 16), b[at + 2] = uint8_t(v >> 8), b[at + 3] = uint8_t(v);
}

class DistUpstreamPeer : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        model_ = test::generate_model(*dir_, "tiny.gguf", {"--preset", "tiny", "--seed", "5"});
        ids_ = dir_->file("ids.txt");
        test::write_token_ids(ids_, test::random_token_ids(5, 512, 3));
        info_ = model::open(model_, {})->info();
    }
    static void TearDownTestSuite() { delete dir_; }
    static inline test::TempDir* dir_ = nullptr;
    static inline std::string model_, ids_;
    static inline model::ModelInfo info_;
};

TEST_F(DistUpstreamPeer, OurCoordinatorSpeaksUpstreamsDialectToItsWorker) {
    const uint32_t n = info_.n_layer;
    dist::Listener data("127.0.0.1", 0);
    uint16_t port = 0;
    {
        dist::Listener probe("127.0.0.1", 0);
        port = probe.port();
    }
    auto c = std::make_unique<Proc>(
        std::vector<std::string>{test::binary("ds4"), "-m", model_, "-t", "1", "--role", "coordinator", "--layers",
                                 "0:1", "--listen", "127.0.0.1", std::to_string(port), "--dist-route-timeout", "30",
                                 "--token-ids", ids_, "--dump-logits-f32", dir_->file("got.f32")},
        dir_->file("c.out"), dir_->file("c.err"));
    // The captured HELLO with this model's layers, context and data port.
    Bytes hello = fixture("hello-worker-flash-q2-layers21-output.bin");
    patch(hello, 2, 2);
    patch(hello, 3, n - 1);
    patch(hello, 6, 4096);
    patch(hello, 7, n);
    patch(hello, 8, data.port());
    dist::Connection control(dist::connect_to("127.0.0.1", port, 100, 100));
    control.send(hello);
    const dist::Message probe = control.recv_message(30);
    ASSERT_TRUE(std::holds_alternative<dist::Work>(probe)) << c->err();
    EXPECT_EQ(std::get<dist::Work>(probe).flags, dist::kWorkIdentify);
    control.send(fixture("result-error-work-flags-0x13.bin"));

    dist::Connection work_conn(data.accept());
    const dist::Message m = work_conn.recv_message(30);
    ASSERT_TRUE(std::holds_alternative<dist::Work>(m)) << c->err();
    const dist::Work& w = std::get<dist::Work>(m);
    EXPECT_EQ(w.model_id, 0u);  // upstream's variant number, not our metadata hash
    EXPECT_EQ(w.flags, dist::kWorkInputHc | dist::kWorkOutputLogits);
    EXPECT_EQ(w.flags & ~dist::kWorkUpstreamFlags, 0u);
    EXPECT_EQ(w.tokens.size(), 1u) << "every row's logits: one token per WORK";
    EXPECT_EQ(w.pos0, 0u);
    EXPECT_EQ(w.layer_start, 2u);
    EXPECT_EQ(w.layer_end, n - 1);
    ASSERT_EQ(w.route.size(), 1u);
    EXPECT_EQ(w.route[0].flags, dist::kRouteOutputLogits);
    EXPECT_EQ(w.input_hc.size(), size_t(info_.hidden_size) * 4);
    Bytes refused = fixture("result-error-no-graph-backend.bin");
    patch(refused, 0, uint32_t(w.request_id >> 32));
    patch(refused, 1, uint32_t(w.request_id));
    work_conn.send(refused);

    EXPECT_NE(c->wait(60), 0);
    EXPECT_TRUE(contains(c->err(), "upstream ds4")) << c->err();
    EXPECT_TRUE(contains(c->err(), "layer slices require the graph backend")) << c->err();
    EXPECT_FALSE(contains(c->err(), "mismatch")) << c->err();
}

TEST_F(DistUpstreamPeer, OurWorkerServesAnUpstreamCoordinator) {
    const uint32_t n = info_.n_layer;
    const int64_t H = info_.hidden_size, V = info_.n_vocab;
    dist::Listener coord("127.0.0.1", 0);
    auto wp = std::make_unique<Proc>(
        std::vector<std::string>{test::binary("ds4"), "-m", model_, "-t", "1", "--role", "worker", "--layers",
                                 "2:output", "--coordinator", "127.0.0.1", std::to_string(coord.port()), "--listen",
                                 "127.0.0.1", "0"},
        dir_->file("w.out"), dir_->file("w.err"));
    dist::Connection control(coord.accept());
    const dist::Message hm = control.recv_message(30);
    ASSERT_TRUE(std::holds_alternative<dist::Hello>(hm)) << wp->err();
    const dist::Hello& h = std::get<dist::Hello>(hm);
    // What upstream's coordinator checks (b0309611, dist_coordinator_client_main).
    EXPECT_EQ(h.model_id, 0u);
    EXPECT_EQ(h.model_name, "DeepSeek V4 Flash");
    EXPECT_TRUE(h.quant_bits == 2 || h.quant_bits == 4) << h.quant_bits;
    EXPECT_EQ(h.n_layers, n);
    EXPECT_EQ(h.layer_start, 2u);
    EXPECT_EQ(h.layer_end, n - 1);
    EXPECT_TRUE(h.has_output);
    EXPECT_TRUE(h.has_hidden);
    EXPECT_GE(h.ctx_size, 64u);
    EXPECT_NE(h.listen_port, 0u);

    // The first layers and the whole model here, for the hidden state and the reference.
    const std::vector<int32_t> tokens = {5, 17, 3};
    model::OpenOptions head_opt;
    head_opt.layers = "0:1";
    auto front = model::open(model_, head_opt);
    auto seq = front->new_sequence({.ctx = 64});
    std::vector<float> hidden(size_t(3 * H));
    model::BatchItem it{seq.get(), tokens};
    front->embed(model::Batch(&it, 1), hidden.data());
    front->eval_layers(model::Batch(&it, 1), hidden.data());
    auto whole = model::open(model_, {});
    auto wseq = whole->new_sequence({.ctx = 64});
    std::vector<float> want(static_cast<size_t>(V));
    model::BatchItem wi{wseq.get(), tokens, model::Logits::Last, want.data()};
    whole->eval(model::Batch(&wi, 1));

    dist::Work w;
    w.model_id = 0;
    w.session_id = 77;
    w.request_id = 9;
    w.prefix_hash = dist::kTokenHashInit;
    w.tokens = tokens;
    w.result_hash = dist::token_hash(w.prefix_hash, tokens);
    w.layer_start = 2;
    w.layer_end = n - 1;
    w.flags = dist::kWorkInputHc | dist::kWorkOutputLogits | 0x10;
    w.input_hc_bits = 32;
    w.input_hc = dist::encode_activations(hidden, 32);
    w.route = {dist::RouteEntry{"127.0.0.1", h.listen_port, 2, n - 1, dist::kRouteOutputLogits}};
    w.route_return = dist::RouteReturn{};
    control.send(dist::encode(w));
    dist::Message rm = control.recv_message(30);
    ASSERT_TRUE(std::holds_alternative<dist::Result>(rm)) << wp->err();
    EXPECT_EQ(std::get<dist::Result>(rm).request_id, 9u);
    EXPECT_EQ(std::get<dist::Result>(rm).status, 1u);
    EXPECT_TRUE(contains(dist::result_error_message(std::get<dist::Result>(rm)), "invalid distributed WORK flags"));

    w.flags = dist::kWorkInputHc | dist::kWorkOutputLogits;
    w.request_id = 10;
    control.send(dist::encode(w));
    rm = control.recv_message(60);
    ASSERT_TRUE(std::holds_alternative<dist::Result>(rm)) << wp->err();
    const dist::Result& r = std::get<dist::Result>(rm);
    EXPECT_EQ(r.status, 0u) << dist::result_error_message(r);
    EXPECT_EQ(r.request_id, 10u);
    EXPECT_EQ(r.kind, dist::ResultKind::logits);
    ASSERT_EQ(r.payload.size(), size_t(V) * 4);
    EXPECT_EQ(std::memcmp(r.payload.data(), want.data(), r.payload.size()), 0) << "logits differ from one process";
    EXPECT_TRUE(wp->running()) << wp->err();
}

// Batched calls (issue 33) on a route with an upstream hop: the coordinator (in process) probes
// for IDENTITY version 2, the upstream worker refuses the probe, and a call of two sequences
// reaches it as two WORKs of one session each in upstream's dialect (no batch flag or record):
// what upstream saw before batching.
TEST_F(DistUpstreamPeer, ABatchedCallReachesAnUpstreamWorkerOneSessionPerWork) {
    const uint32_t n = info_.n_layer;
    const int64_t V = info_.n_vocab;
    dist::Listener data("127.0.0.1", 0);
    uint16_t port = 0;
    {
        dist::Listener probe("127.0.0.1", 0);
        port = probe.port();
    }
    pipeline::DistOptions d;
    d.role = pipeline::Role::coordinator;
    d.layers = "0:1";
    d.listen_host = "127.0.0.1";
    d.listen_port = port;
    d.route_timeout_s = 30;
    auto opened = std::async(std::launch::async, [&] { return pipeline::open_model(model_, {.threads = 1}, d); });
    Bytes hello = fixture("hello-worker-flash-q2-layers21-output.bin");
    patch(hello, 2, 2);
    patch(hello, 3, n - 1);
    patch(hello, 6, 4096);
    patch(hello, 7, n);
    patch(hello, 8, data.port());
    dist::Connection control(dist::connect_to("127.0.0.1", port, 100, 100));
    control.send(hello);
    const dist::Message probe = control.recv_message(30);
    ASSERT_TRUE(std::holds_alternative<dist::Work>(probe));
    EXPECT_EQ(std::get<dist::Work>(probe).flags, dist::kWorkIdentify);
    EXPECT_EQ(std::get<dist::Work>(probe).pos0, dist::kIdentityVersion2);
    control.send(fixture("result-error-work-flags-0x13.bin"));
    auto pm = opened.get();

    auto s0 = pm->new_sequence({.ctx = 64}), s1 = pm->new_sequence({.ctx = 64});
    const std::vector<int32_t> t0 = {5, 17}, t1 = {3, 9, 11};
    std::vector<float> l0(size_t(V), 1.f), l1(size_t(V), 1.f);
    const model::BatchItem items[2] = {{s0.get(), t0, model::Logits::Last, l0.data()},
                                       {s1.get(), t1, model::Logits::Last, l1.data()}};
    auto evaluated = std::async(std::launch::async, [&] { pm->eval(model::Batch(items, 2)); });
    dist::Connection work_conn(data.accept());
    std::vector<uint64_t> sessions;
    for (const auto& t : {t0, t1}) {
        const dist::Message m = work_conn.recv_message(30);
        ASSERT_TRUE(std::holds_alternative<dist::Work>(m));
        const dist::Work& w = std::get<dist::Work>(m);
        EXPECT_EQ(w.model_id, 0u);
        EXPECT_EQ(w.flags, dist::kWorkInputHc | dist::kWorkOutputLogits);
        EXPECT_TRUE(w.batch.empty());
        EXPECT_EQ(w.tokens, t);
        EXPECT_EQ(w.pos0, 0u);
        sessions.push_back(w.session_id);
        dist::Result r;
        r.request_id = w.request_id;
        r.result_hash = w.result_hash;
        r.kind = dist::ResultKind::logits;
        r.payload_bits = 32;
        r.payload.assign(size_t(V) * 4, 0);
        work_conn.send(dist::encode(r));
    }
    evaluated.get();
    ASSERT_EQ(sessions.size(), 2u);
    EXPECT_NE(sessions[0], sessions[1]);
    EXPECT_EQ(l0, std::vector<float>(size_t(V), 0.f));
    EXPECT_EQ(l1, std::vector<float>(size_t(V), 0.f));
}

// Our worker offers batched WORK (IDENTITY version 2) only to a prober that reads version 2
// (the probe's pos0); an older coordinator of ours, whose probe has pos0 0, gets version 1.
TEST_F(DistUpstreamPeer, OurWorkerOffersBatchedWorkOnlyToAProberThatReadsIt) {
    dist::Listener coord("127.0.0.1", 0);
    auto wp = std::make_unique<Proc>(
        std::vector<std::string>{test::binary("ds4"), "-m", model_, "-t", "1", "--role", "worker", "--layers",
                                 "2:output", "--coordinator", "127.0.0.1", std::to_string(coord.port()), "--listen",
                                 "127.0.0.1", "0"},
        dir_->file("wb.out"), dir_->file("wb.err"));
    dist::Connection control(coord.accept());
    ASSERT_TRUE(std::holds_alternative<dist::Hello>(control.recv_message(30))) << wp->err();
    for (const uint32_t version : {0u, dist::kIdentityVersion2}) {
        dist::Work probe;
        probe.flags = dist::kWorkIdentify;
        probe.pos0 = version;
        probe.tokens = {0};
        probe.result_hash = dist::token_hash(probe.prefix_hash, probe.tokens);
        Bytes frame = dist::encode(probe);
        control.send(frame);
        const dist::Message m = control.recv_message(30);
        ASSERT_TRUE(std::holds_alternative<dist::Identity>(m)) << wp->err();
        EXPECT_EQ(std::get<dist::Identity>(m).features, version ? dist::kFeatureBatchedWork : 0u);
        EXPECT_EQ(std::get<dist::Identity>(m).metadata_hash, info_.metadata_hash);
    }
    EXPECT_TRUE(wp->running()) << wp->err();
}

}  // namespace
}  // namespace ds4
