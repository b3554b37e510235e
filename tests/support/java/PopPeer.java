import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.consumer.AckCallback;
import org.apache.rocketmq.client.consumer.AckResult;
import org.apache.rocketmq.client.consumer.AckStatus;
import org.apache.rocketmq.client.consumer.PopCallback;
import org.apache.rocketmq.client.consumer.PopResult;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.protocol.header.AckMessageRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.ExtraInfoUtil;
import org.apache.rocketmq.remoting.protocol.header.PopMessageRequestHeader;

/**
 * RocketMQ's own Java client popping and acking at one broker, as its push consumer in pop mode
 * does (MQClientAPIImpl.popMessageAsync / ackMessageAsync, receipt handles from its
 * processPopResponse), to show that handles are shared with staticmq's PopConsumer.
 *
 * <p>java -cp ROCKETMQ_JARS/*:CLASSES PopPeer NAMESRV BROKER_ADDR BROKER_NAME GROUP TOPIC pop WANT TIMEOUT_S
 * prints "MSG body handle" per popped message (invisible 3 s), and exits 0 once WANT came, else 1.
 * <p>... PopPeer NAMESRV BROKER_ADDR BROKER_NAME GROUP TOPIC ack HANDLE... prints "ACKED n".
 */
public final class PopPeer {
    public static void main(String[] args) throws Exception {
        String namesrv = args[0], addr = args[1], brokerName = args[2], group = args[3], topic = args[4];
        DefaultMQProducer client = new DefaultMQProducer("staticmq-pop-peer");
        client.setNamesrvAddr(namesrv);
        client.setInstanceName("staticmq-pop-peer-" + ProcessHandle.current().pid());
        client.start();
        MQClientAPIImpl api = client.getDefaultMQProducerImpl().getMqClientFactory().getMQClientAPIImpl();
        int status = 0;
        if (args[5].equals("pop")) {
            int want = Integer.parseInt(args[6]);
            long deadline = System.currentTimeMillis() + 1000L * Long.parseLong(args[7]);
            List<MessageExt> got = new ArrayList<>();
            while (got.size() < want && System.currentTimeMillis() < deadline) {
                PopMessageRequestHeader h = new PopMessageRequestHeader();
                h.setConsumerGroup(group);
                h.setTopic(topic);
                h.setQueueId(-1);
                h.setMaxMsgNums(32);
                h.setInvisibleTime(3000L);
                h.setPollTime(1000L);
                h.setBornTime(System.currentTimeMillis());
                h.setInitMode(0);
                h.setExpType("TAG");
                h.setExp("*");
                CompletableFuture<PopResult> answer = new CompletableFuture<>();
                api.popMessageAsync(brokerName, addr, h, 5000L, new PopCallback() {
                    public void onSuccess(PopResult r) { answer.complete(r); }
                    public void onException(Throwable e) { answer.completeExceptionally(e); }
                });
                PopResult r = answer.get(10, TimeUnit.SECONDS);
                if (r.getMsgFoundList() != null) {
                    got.addAll(r.getMsgFoundList());
                }
            }
            for (MessageExt m : got) {
                System.out.println("MSG " + new String(m.getBody(), StandardCharsets.UTF_8) + " "
                    + m.getProperty(MessageConst.PROPERTY_POP_CK));
            }
            status = got.size() >= want ? 0 : 1;
        } else {
            int acked = 0;
            for (int i = 6; i < args.length; i++) {
                String[] extra = ExtraInfoUtil.split(args[i]);
                AckMessageRequestHeader h = new AckMessageRequestHeader();
                h.setTopic(ExtraInfoUtil.getRealTopic(extra, topic, group));
                h.setQueueId(ExtraInfoUtil.getQueueId(extra));
                h.setOffset(ExtraInfoUtil.getQueueOffset(extra));
                h.setConsumerGroup(group);
                h.setExtraInfo(args[i]);
                h.setBrokerName(brokerName);
                CompletableFuture<AckResult> answer = new CompletableFuture<>();
                api.ackMessageAsync(addr, 5000L, new AckCallback() {
                    public void onSuccess(AckResult r) { answer.complete(r); }
                    public void onException(Throwable e) { answer.completeExceptionally(e); }
                }, h);
                if (answer.get(10, TimeUnit.SECONDS).getStatus() == AckStatus.OK) {
                    acked++;
                }
            }
            System.out.println("ACKED " + acked);
        }
        client.shutdown();
        System.exit(status);
    }
}
