#include "sim/network.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>

#include "sim/world.h"

namespace onceflow::sim {
namespace {

// A world with an "echo" server and a client whose single fiber runs `body`.
class NetworkTest : public ::testing::Test {
 protected:
  void SetUp() override { make_world(LinkOptions{}); }

  void make_world(LinkOptions link) {
    World::Options options;
    options.seed = 42;
    options.network.link = link;
    world_ = std::make_unique<World>(options);
    server_ = world_->add_node("server", [this](NodeContext& ctx) -> std::shared_ptr<void> {
      ctx.network.serve("echo", [this](const std::string& from, std::string_view req) {
        ++handled_;
        copies_ += world_->network().delivering_network_copy() ? 1 : 0;
        return Result<std::string>(from + ":" + std::string(req));
      });
      return nullptr;
    });
    client_ = world_->add_node("client", [](NodeContext&) { return nullptr; });
    world_->start(server_);
    world_->start(client_);
  }

  Result<std::string> call_once(Micros timeout_us = 10'000) {
    std::optional<Result<std::string>> out;
    world_->runtime(client_).spawn("call", [&] {
      out = world_->network_endpoint(client_).call("server", "echo", "hi", timeout_us);
    });
    world_->run_until(world_->now() + timeout_us + 1);
    EXPECT_TRUE(out.has_value());
    return out.value_or(Status::aborted("no result"));
  }

  std::unique_ptr<World> world_;
  NodeIndex server_ = 0, client_ = 0;
  int handled_ = 0;
  int copies_ = 0;  // handled requests that were the link's duplicates
};

TEST_F(NetworkTest, RequestGetsItsReply) {
  auto reply = call_once();
  ASSERT_TRUE(reply.has_value()) << reply.error().to_string();
  EXPECT_EQ(*reply, "client:hi");
  EXPECT_EQ(handled_, 1);
}

TEST_F(NetworkTest, PartitionTimesOutWithoutRunningTheHandler) {
  world_->network().partition(server_, client_);
  auto reply = call_once();
  ASSERT_FALSE(reply.has_value());
  EXPECT_TRUE(reply.error().is_timeout());
  EXPECT_EQ(handled_, 0);
  world_->network().heal();
  EXPECT_TRUE(call_once().has_value());
}

TEST_F(NetworkTest, OneWayPartitionLosesOnlyTheReply) {
  world_->network().block(server_, client_);
  auto reply = call_once();
  ASSERT_FALSE(reply.has_value());
  EXPECT_TRUE(reply.error().is_timeout());
  EXPECT_EQ(handled_, 1);  // the request ran; its answer was lost
}

TEST_F(NetworkTest, DownNodeRefuses) {
  world_->crash(server_);
  auto reply = call_once();
  ASSERT_FALSE(reply.has_value());
  EXPECT_TRUE(reply.error().is_unreachable());
}

// A user's `catch (...)` may swallow the FiberKilled that unwinds a crashed node's fiber: the
// fiber goes on, but sends nothing for the dead node.
TEST_F(NetworkTest, AFiberThatSwallowedItsKillSendsNothing) {
  bool sent_after_kill = false;
  world_->runtime(client_).spawn("swallows", [&] {
    try {
      world_->runtime(client_).sleep_for(1'000'000);
    } catch (...) {  // the mistake: FiberKilled caught and dropped
    }
    try {
      (void)world_->network_endpoint(client_).call("server", "echo", "after", 10'000);
      sent_after_kill = true;
    } catch (const FiberKilled&) {
    }
  });
  world_->run_until(world_->now() + 1'000);
  world_->crash(client_);
  world_->run_until(world_->now() + 100'000);
  EXPECT_FALSE(sent_after_kill);
  EXPECT_EQ(handled_, 0);
}

TEST_F(NetworkTest, PausedServerAnswersAfterItResumes) {
  world_->pause(server_);
  world_->scheduler().at(5'000, kWorldNode, [this] { world_->resume(server_); });
  auto reply = call_once(20'000);
  ASSERT_TRUE(reply.has_value());
  EXPECT_GE(world_->now(), 5'000);
}

TEST_F(NetworkTest, DuplicatesRunTheHandlerTwiceButAnswerOnce) {
  LinkOptions link;
  link.duplicate_probability = 1.0;
  make_world(link);
  auto reply = call_once();
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(handled_, 2);
  EXPECT_EQ(copies_, 1);  // the second run says it is the link's copy, so a target can record it
  EXPECT_FALSE(world_->network().delivering_network_copy());
}

TEST_F(NetworkTest, DroppedRepliesLookLikeTimeouts) {
  LinkOptions link;
  link.reply_drop_probability = 1.0;
  make_world(link);
  auto reply = call_once();
  ASSERT_FALSE(reply.has_value());
  EXPECT_TRUE(reply.error().is_timeout());
  EXPECT_EQ(handled_, 1);
}

TEST_F(NetworkTest, LatencyStaysWithinTheLinkBounds) {
  LinkOptions link;
  link.latency_us_min = 1'000;
  link.latency_us_mean = 1'000;
  make_world(link);
  const Micros start = world_->now();
  std::optional<Micros> done_at;
  world_->runtime(client_).spawn("call", [&] {
    (void)world_->network_endpoint(client_).call("server", "echo", "x", 100'000);
    done_at = world_->now();
  });
  world_->run_until(kNever);
  ASSERT_TRUE(done_at.has_value());
  EXPECT_EQ(*done_at - start, 2'000);  // exactly min latency each way
}

TEST(LinkOptionsTest, RejectsInconsistentOptions) {
  LinkOptions link;
  link.latency_us_mean = link.latency_us_min - 1;
  EXPECT_NE(link.invalid_reason(), "");
  link = LinkOptions{};
  link.drop_probability = 1.5;
  EXPECT_NE(link.invalid_reason(), "");
  EXPECT_EQ(LinkOptions{}.invalid_reason(), "");
}

}  // namespace
}  // namespace onceflow::sim
